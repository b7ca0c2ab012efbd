#!/usr/bin/env node
// The `agentmesh` command: a stable entry that exists before the TypeScript build, so npm links it at install.
import { existsSync } from 'node:fs';
import module from 'node:module';

// Node >= 22.1 keeps compiled code between runs (NODE_DISABLE_COMPILE_CACHE=1 turns it off); Node 20 starts without.
module.enableCompileCache?.();

const main = new URL('../dist/main.js', import.meta.url);
if (!existsSync(main)) {
  process.stderr.write('agentmesh is not built yet: run "npm run build" at the repository root first.\n');
  process.exit(2);
}
await import(main.href);
