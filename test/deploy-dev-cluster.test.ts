import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, test } from 'vitest';
import { freePort } from './helpers/nats-server.js';

/**
 * scripts/dev-cluster.sh with a stand-in for the CLI (AGENTMESH_CLI): a real nats-server, N actor processes with
 * their own logs and health ports, and a Ctrl-C (SIGINT) that stops every process and removes the store. The
 * stand-in speaks the NATS protocol itself (CONNECT with the user and password it was given) before it reports
 * ready, so --secure also proves that deploy/nats/nats.conf lets each role in.
 */

const SCRIPT = fileURLToPath(new URL('../scripts/dev-cluster.sh', import.meta.url));

const STUB = String.raw`
import { createServer } from 'node:http';
import { connect } from 'node:net';
const args = process.argv.slice(2);
const flag = (name) => { const i = args.indexOf(name); return i < 0 ? undefined : args[i + 1]; };
const url = new URL(flag('--nats'));
const healthPort = Number(flag('--health-port'));
if (process.env.STUB_FAIL === args[0]) { console.log('stand-in failing on purpose'); process.exit(5); }
let ready = false;
const sock = connect(Number(url.port), url.hostname);
sock.on('error', (e) => { console.log('nats connection failed', e.message); process.exit(4); });
let buf = '';
sock.on('data', (d) => {
  buf += d.toString();
  if (buf.includes('INFO ') && !buf.includes('SENT')) {
    buf += 'SENT';
    const auth = process.env.NATS_USER ? { user: process.env.NATS_USER, pass: process.env.NATS_PASSWORD } : {};
    sock.write('CONNECT ' + JSON.stringify({ verbose: false, pedantic: false, ...auth }) + '\r\nPING\r\n');
  }
  if (buf.includes('PONG')) ready = true;
  if (buf.includes('-ERR')) { console.log('nats error', buf); process.exit(3); }
});
createServer((req, res) => {
  res.statusCode = req.url === '/healthz' || (req.url === '/readyz' && ready) ? 200 : 503;
  res.end();
}).on('error', (e) => { console.log('health server failed', e.message); process.exit(4); }).listen(healthPort, '127.0.0.1');
console.log(JSON.stringify({ pid: process.pid, command: args[0], args, user: process.env.NATS_USER ?? null }));
process.on('SIGTERM', () => { console.log('drained'); process.exit(0); });
`;

let child: ChildProcess | undefined;
let dir: string | undefined;

afterEach(() => {
  if (child && child.exitCode === null && child.pid !== undefined) child.kill('SIGKILL');
  if (dir) rmSync(dir, { recursive: true, force: true });
  child = undefined;
  dir = undefined;
});

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = tcpConnect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

interface Cluster {
  output: () => string;
  logs: string;
  port: number;
  exited: Promise<number | null>;
}

/** Starts the script; resolves once it prints "ready", exits (then `exited` has its code), or after 45 s. */
async function startCluster(extra: string[], env: Record<string, string> = {}): Promise<Cluster> {
  dir = mkdtempSync(join(tmpdir(), 'agentmesh-devcluster-test-'));
  const stub = join(dir, 'stub-cli.mjs');
  writeFileSync(stub, STUB);
  const logs = join(dir, 'logs');
  const port = await freePort();
  // Below Linux's ephemeral range (32768-60999), so no outgoing connection holds an actor's health port.
  const healthBase = 10_000 + Math.floor(Math.random() * 20_000);
  const c = spawn(
    'bash',
    [SCRIPT, '--port', String(port), '--health-base', String(healthBase), '--logs', logs, ...extra],
    { env: { ...process.env, ...env, AGENTMESH_CLI: `node ${stub}` }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  child = c;
  let out = '';
  const exited = new Promise<number | null>((resolve) => c.once('exit', (code) => resolve(code)));
  const ready = new Promise<void>((resolve) => {
    const onData = (d: Buffer): void => {
      out += d.toString();
      if (out.includes('dev-cluster: ready')) resolve();
    };
    c.stdout?.on('data', onData);
    c.stderr?.on('data', onData);
  });
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<void>((resolve) => (timer = setTimeout(resolve, 45_000)));
  await Promise.race([ready, exited, waited]);
  clearTimeout(timer);
  return { output: () => out, logs, port, exited };
}

async function runCluster(extra: string[]): Promise<Cluster> {
  const cluster = await startCluster(extra);
  if (!cluster.output().includes('dev-cluster: ready')) {
    const logs = existsSync(cluster.logs)
      ? readdirSync(cluster.logs).map((f) => `--- ${f}\n${readFileSync(join(cluster.logs, f), 'utf8')}`)
      : [];
    const ended = child?.exitCode ?? child?.signalCode;
    const state = ended === null || ended === undefined ? 'not ready after 45 s' : `exited ${ended}`;
    throw new Error(`dev-cluster ${state}:\n${cluster.output()}\n${logs.join('\n')}`);
  }
  return cluster;
}

async function interrupt(cluster: Cluster): Promise<number | null> {
  child!.kill('SIGINT');
  return cluster.exited;
}

function actorLogs(
  logs: string,
): Map<string, { pid: number; command: string; args: string[]; user: string | null }> {
  const out = new Map<string, { pid: number; command: string; args: string[]; user: string | null }>();
  for (const f of readdirSync(logs)) {
    if (f === 'nats-server.log') continue;
    out.set(f.replace(/\.log$/, ''), JSON.parse(readFileSync(join(logs, f), 'utf8').split('\n')[0]!));
  }
  return out;
}

// Six processes start at once while other test files run: under that load, readiness can take well over 20 s.
describe('scripts/dev-cluster.sh', { timeout: 60_000 }, () => {
  test('starts nats-server and catalog, planners and N workers as processes; Ctrl-C stops them all', async () => {
    const cluster = await runCluster(['--workers', '3', '--planners', '2', '--worker-args', '--threads 1']);
    const { logs, port, output } = cluster;
    expect(await portOpen(port)).toBe(true);
    const actors = actorLogs(logs);
    expect([...actors.keys()].sort()).toEqual([
      'catalog',
      'planner-1',
      'planner-2',
      'worker-1',
      'worker-2',
      'worker-3',
    ]);
    for (const [name, a] of actors) {
      expect(a.command).toBe(name.replace(/-\d+$/, ''));
      expect(a.args).toContain(`nats://127.0.0.1:${port}`);
      expect(a.args).toContain('--health-port');
      expect(a.user).toBeNull();
      expect(alive(a.pid)).toBe(true);
    }
    expect(actors.get('worker-1')?.args).toEqual(expect.arrayContaining(['--threads', '1']));
    const store = /\(store ([^)]+)\)/.exec(output())?.[1];
    expect(store && existsSync(store)).toBe(true);

    expect(await interrupt(cluster)).toBe(0);
    for (const [name, a] of actors) {
      expect(alive(a.pid), name).toBe(false);
      expect(readFileSync(join(logs, `${name}.log`), 'utf8')).toContain('drained');
    }
    expect(await portOpen(port)).toBe(false);
    expect(existsSync(store!)).toBe(false);
    expect(output()).toContain('logs kept in');
  });

  test('--secure runs nats-server with deploy/nats/nats.conf and each actor as its role', async () => {
    const cluster = await runCluster(['--workers', '1', '--secure']);
    const { logs, output } = cluster;
    const actors = actorLogs(logs);
    // Each stand-in is ready only after nats-server accepted its user and password.
    expect(Object.fromEntries([...actors].map(([n, a]) => [n, a.user]))).toEqual({
      catalog: 'catalog',
      'planner-1': 'planner',
      'worker-1': 'worker',
    });
    expect(output()).toMatch(/clients connect as NATS_USER=client NATS_PASSWORD=p[0-9a-f]{24}/);
    expect(await interrupt(cluster)).toBe(0);
    for (const a of actors.values()) expect(alive(a.pid)).toBe(false);
  });

  test('an actor that exits before it is ready: the script names it, shows its log, and stops the rest at once', async () => {
    const started = Date.now();
    const cluster = await startCluster(['--workers', '1'], { STUB_FAIL: 'worker' });
    expect(await cluster.exited).toBe(1);
    expect(Date.now() - started).toBeLessThan(30_000);
    const out = cluster.output();
    expect(out).not.toContain('dev-cluster: ready');
    expect(out).toMatch(
      /dev-cluster: worker-1 exited before it was ready \(health port \d+\); last lines of its log:\n.*stand-in failing on purpose/,
    );
    expect(out).toContain('not every actor became ready');
    // the others may be stopped before their stand-in has even started: their pids come from the script's output
    for (const name of ['catalog', 'planner-1']) {
      const pid = Number(new RegExp(`dev-cluster: ${name} +pid (\\d+)`).exec(out)?.[1]);
      expect(pid, name).toBeGreaterThan(0);
      expect(alive(pid), name).toBe(false);
    }
  });

  test('rejects bad options with exit 2 and a message', async () => {
    const c = spawn('bash', [SCRIPT, '--workers', 'x'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    c.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((resolve) => c.once('exit', resolve));
    expect(code).toBe(2);
    expect(err).toContain('not a number: x');
  });
});
