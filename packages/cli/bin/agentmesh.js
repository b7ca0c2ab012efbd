#!/usr/bin/env node
// The `agentmesh` command: a stable entry that exists before the TypeScript build, so npm links it at install.
// It runs the bundle `npm run build` makes (dist/bundle/, a few files instead of some 500 modules) while that bundle
// is as new as the build it was made from, and the built modules (dist/main.js) otherwise: after a `tsc -b` alone,
// or with AGENTMESH_NO_BUNDLE=1.
import { existsSync } from 'node:fs';
import module from 'node:module';
import { BUNDLE_DIR, bundleIsCurrent } from './bundle-stamp.js';

// Node >= 22.1 keeps compiled code between runs (NODE_DISABLE_COMPILE_CACHE=1 turns it off); Node 20 starts without.
module.enableCompileCache?.();

const main = bundleIsCurrent() ? new URL('main.js', BUNDLE_DIR) : new URL('../dist/main.js', import.meta.url);
if (!existsSync(main)) {
  process.stderr.write('agentmesh is not built yet: run "npm run build" at the repository root first.\n');
  process.exit(2);
}
await import(main.href);
