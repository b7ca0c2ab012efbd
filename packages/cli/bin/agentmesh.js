#!/usr/bin/env node
// The `agentmesh` command: a stable entry that exists before the TypeScript build, so npm links it at install.
// It runs the bundle `npm run build` makes (dist/bundle/, a few files instead of some 500 modules) while that bundle
// is as new as the build it was made from, and the built modules (dist/main.js) otherwise: after a `tsc -b` alone,
// or with AGENTMESH_NO_BUNDLE=1.
import { existsSync, readFileSync, statSync } from 'node:fs';
import module from 'node:module';

// Node >= 22.1 keeps compiled code between runs (NODE_DISABLE_COMPILE_CACHE=1 turns it off); Node 20 starts without.
module.enableCompileCache?.();

const BUNDLE_DIR = new URL('../dist/bundle/', import.meta.url);

/** True when the bundle exists and no project was built again since it was made (a missing build info is fine). */
function bundleIsCurrent() {
  if (process.env.AGENTMESH_NO_BUNDLE === '1') return false;
  try {
    const { builds } = JSON.parse(readFileSync(new URL('stamp.json', BUNDLE_DIR), 'utf8'));
    for (const [path, mtimeMs] of Object.entries(builds)) {
      const info = statSync(new URL(path, BUNDLE_DIR), { throwIfNoEntry: false });
      if (info !== undefined && info.mtimeMs !== mtimeMs) return false;
    }
    return existsSync(new URL('main.js', BUNDLE_DIR));
  } catch {
    return false;
  }
}

const main = bundleIsCurrent() ? new URL('main.js', BUNDLE_DIR) : new URL('../dist/main.js', import.meta.url);
if (!existsSync(main)) {
  process.stderr.write('agentmesh is not built yet: run "npm run build" at the repository root first.\n');
  process.exit(2);
}
await import(main.href);
