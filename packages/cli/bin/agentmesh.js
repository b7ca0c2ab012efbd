#!/usr/bin/env node
// The `agentmesh` command: a stable entry that exists before the TypeScript build, so npm links it at install.
import { existsSync } from 'node:fs';

const main = new URL('../dist/main.js', import.meta.url);
if (!existsSync(main)) {
  process.stderr.write('agentmesh is not built yet: run "npm run build" at the repository root first.\n');
  process.exit(2);
}
await import(main.href);
