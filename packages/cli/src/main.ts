#!/usr/bin/env node
import { runCli } from './cli.js';

const code = await runCli(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: process.stdin,
});
process.exitCode = code;
// Give pino's async stderr a moment to flush, then leave even if a library left a handle open.
setTimeout(() => process.exit(code), 50).unref();
