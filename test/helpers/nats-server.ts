import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { createServer, connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const NATS_INSTALL_HINT =
  'No NATS server is available for the tests. Install one with "apt-get install -y nats-server" ' +
  '(Debian/Ubuntu), or start one with JetStream ("nats-server -js") and set NATS_URL, or run a Docker engine.';

/** Finds the nats-server binary: NATS_SERVER_BIN, PATH, or Debian's /usr/sbin. */
export function findNatsServerBinary(): string | undefined {
  const candidates = [
    process.env['NATS_SERVER_BIN'],
    'nats-server',
    '/usr/sbin/nats-server',
    '/usr/local/bin/nats-server',
  ];
  for (const c of candidates) {
    if (!c) continue;
    const r = spawnSync(c, ['--version'], { encoding: 'utf8' });
    if (r.status === 0) return c;
  }
  return undefined;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

async function waitForPort(port: number, timeoutMs: number, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`nats-server exited with code ${child.exitCode} before listening`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = tcpConnect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline)
      throw new Error(`nats-server did not listen on ${port} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface NatsServerHandle {
  url: string;
  port: number;
  storeDir: string;
  /** Stops the server (SIGTERM, then SIGKILL). */
  stop(): Promise<void>;
  /** Stops and starts it again on the same port with the same store. */
  restart(downMs?: number): Promise<void>;
  /** Stops it and removes its store. */
  dispose(): Promise<void>;
}

export interface StartNatsOptions {
  port?: number;
  storeDir?: string;
  /** Path of a server configuration file (-c); JetStream is still enabled with -js. */
  configFile?: string;
  extraArgs?: string[];
  /** Start with JetStream (default true). */
  jetstream?: boolean;
}

/** Starts a real nats-server with JetStream on a free loopback port and a temporary store. */
export async function startNatsServer(options: StartNatsOptions = {}): Promise<NatsServerHandle> {
  const bin = findNatsServerBinary();
  if (bin === undefined) throw new Error(NATS_INSTALL_HINT);
  const port = options.port ?? (await freePort());
  const storeDir = options.storeDir ?? mkdtempSync(join(tmpdir(), 'agentmesh-nats-'));
  let child: ChildProcess | undefined;
  const start = async () => {
    const args = [
      ...(options.configFile ? ['-c', options.configFile] : []),
      ...(options.jetstream === false ? [] : ['-js']),
      '-a',
      '127.0.0.1',
      '-p',
      String(port),
      '-sd',
      storeDir,
      ...(options.extraArgs ?? []),
    ];
    child = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    try {
      await waitForPort(port, 10_000, child);
    } catch (error) {
      throw new Error(`${(error as Error).message}\n${stderr}`);
    }
  };
  const stop = async () => {
    const c = child;
    if (!c || c.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => c.kill('SIGKILL'), 5000);
      c.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      c.kill('SIGTERM');
    });
  };
  await start();
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    storeDir,
    stop,
    restart: async (downMs = 0) => {
      await stop();
      if (downMs > 0) await new Promise((r) => setTimeout(r, downMs));
      await start();
    },
    dispose: async () => {
      await stop();
      if (!options.storeDir && existsSync(storeDir)) rmSync(storeDir, { recursive: true, force: true });
    },
  };
}
