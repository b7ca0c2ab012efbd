#!/usr/bin/env node
// Copies what the runtime image needs from a built tree: for each npm workspace of the root package.json, its
// package.json and the paths its "files" field publishes (the built dist/ folder). Used by deploy/Dockerfile:
//   node deploy/stage-runtime.mjs /stage        (run from the repository root, after `npm run build`)
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const out = process.argv[2];
if (!out) {
  console.error('usage: node deploy/stage-runtime.mjs OUT_DIR');
  process.exit(2);
}
const root = JSON.parse(readFileSync('package.json', 'utf8'));
const skip = (src) => /(^|\/)(\.tsbuildinfo|[^/]*\.test\.(js|d\.ts|js\.map|d\.ts\.map))$/.test(src);
for (const ws of root.workspaces) {
  const pkg = JSON.parse(readFileSync(join(ws, 'package.json'), 'utf8'));
  mkdirSync(join(out, ws), { recursive: true });
  cpSync(join(ws, 'package.json'), join(out, ws, 'package.json'));
  // a "!pattern" entry leaves files out of a pack; the staged copy leaves out build info and tests by itself
  for (const entry of (pkg.files ?? []).filter((e) => !e.startsWith('!'))) {
    const from = join(ws, entry);
    if (!existsSync(from)) {
      console.error(`stage-runtime: ${from} is missing (listed in ${ws}/package.json "files"); build first`);
      process.exit(1);
    }
    rmSync(join(out, ws, entry), { recursive: true, force: true });
    cpSync(from, join(out, ws, entry), { recursive: true, filter: (src) => !skip(src) });
  }
  console.log(`staged ${pkg.name}: package.json ${(pkg.files ?? []).join(' ')}`);
}
