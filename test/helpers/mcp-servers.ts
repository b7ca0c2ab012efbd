import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { freePort } from './nats-server.js';

const require = createRequire(import.meta.url);

function packageDir(name: string): string {
  return dirname(require.resolve(`${name}/package.json`));
}

/** server-everything's entry point (argument: stdio | streamableHttp). */
export const EVERYTHING = join(packageDir('@modelcontextprotocol/server-everything'), 'dist/index.js');
/** server-filesystem's entry point (arguments: the allowed folders). */
export const FILESYSTEM = join(packageDir('@modelcontextprotocol/server-filesystem'), 'dist/index.js');

export interface HttpEverything {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** Starts server-everything over streamable HTTP on a free port; resolves once it says it listens. */
export async function startHttpEverything(): Promise<HttpEverything> {
  const port = await freePort();
  const child = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let seen = '';
  await new Promise<void>((resolve, reject) => {
    child.stderr?.on('data', (chunk: Buffer) => {
      seen += chunk.toString('utf8');
      if (seen.includes('listening')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`server-everything exited ${code}: ${seen}`)));
  });
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    child,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Resolves when `predicate` holds, checking on each event-loop turn batch (no fixed sleep decides the result). */
export async function waitFor(
  predicate: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 30_000,
): Promise<void> {
  const start = Date.now();
  while (!(await predicate())) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
