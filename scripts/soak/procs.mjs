// Processes for `npm run soak`: free ports, nats-server nodes (one, or a cluster with JetStream on each), and actor
// processes that resolve once their log says they are ready.
import { spawn, spawnSync } from 'node:child_process';
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { connect as tcpConnect, createServer } from 'node:net';
import { join } from 'node:path';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export async function waitPort(port) {
  for (let i = 0; i < 300; i++) {
    const ok = await new Promise((r) => {
      const c = tcpConnect(port, '127.0.0.1');
      c.once('connect', () => (c.destroy(), r(true)));
      c.once('error', () => r(false));
    });
    if (ok) return;
    await sleep(50);
  }
  throw new Error(`nothing listens on ${port}`);
}

export function natsServerBinary() {
  const bin = ['nats-server', '/usr/sbin/nats-server'].find((b) => spawnSync(b, ['--version']).status === 0);
  if (!bin) throw new Error('nats-server not found: apt-get install -y nats-server');
  return bin;
}

/** One nats-server with JetStream on loopback. */
export async function startNats(dir) {
  const port = await freePort();
  const http = await freePort();
  const args = ['-js', '-a', '127.0.0.1', '-p', String(port), '-m', String(http), '-sd', join(dir, 'js')];
  const child = spawn(natsServerBinary(), args, { stdio: 'ignore' });
  await waitPort(port);
  return { url: `nats://127.0.0.1:${port}`, monitor: `http://127.0.0.1:${http}`, child };
}

/**
 * A `size`-node nats-server cluster on loopback (routes between all nodes, JetStream with its own store on each,
 * server names n1..nN). Each node can be killed (-9) and started again on the same ports and store.
 */
export async function startNatsCluster(dir, size = 3) {
  const bin = natsServerBinary();
  const ports = [];
  for (let i = 0; i < size; i++) ports.push({ client: await freePort(), cluster: await freePort() });
  const routes = ports.map((p) => `"nats-route://127.0.0.1:${p.cluster}"`).join(', ');
  const nodes = ports.map((p, i) => {
    const name = `n${i + 1}`;
    const conf = join(dir, `${name}.conf`);
    mkdirSync(join(dir, name), { recursive: true });
    writeFileSync(
      conf,
      [
        `server_name: ${name}`,
        `listen: "127.0.0.1:${p.client}"`,
        `jetstream { store_dir: "${join(dir, name)}" }`,
        `cluster { name: soak, listen: "127.0.0.1:${p.cluster}", routes: [${routes}] }`,
        '',
      ].join('\n'),
    );
    let child;
    const running = () => child !== undefined && child.exitCode === null && child.signalCode === null;
    return {
      name,
      url: `nats://127.0.0.1:${p.client}`,
      running,
      async start() {
        if (running()) return;
        child = spawn(bin, ['-c', conf], { stdio: 'ignore' });
        await waitPort(p.client);
      },
      async kill() {
        if (!running()) return;
        const c = child;
        await new Promise((resolve) => {
          c.once('exit', resolve);
          c.kill('SIGKILL');
        });
      },
    };
  });
  await Promise.all(nodes.map((n) => n.start()));
  return { nodes, urls: nodes.map((n) => n.url), stop: () => Promise.all(nodes.map((n) => n.kill())) };
}

/** Spawns a node process; resolves once its output shows it is ready (`"ready":true` for a worker, `ready` else). */
export function spawnActor(kind, args, env, options = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: options.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const ready = kind === 'worker' ? /"ready":true/ : /ready/;
    let resolved = false;
    const timer = setTimeout(() => {
      if (resolved) return;
      child.kill('SIGKILL');
      reject(new Error(`${kind} not ready in ${options.readyMs ?? 60_000} ms: ${out}`));
    }, options.readyMs ?? 60_000);
    const logFile = process.env.AGENTMESH_SOAK_LOGS
      ? join(process.env.AGENTMESH_SOAK_LOGS, `${kind}-${child.pid}.log`)
      : undefined;
    const onData = (d) => {
      if (logFile !== undefined) appendFileSync(logFile, d);
      out = (out + d.toString()).slice(-4000);
      if (!resolved && ready.test(out)) {
        resolved = true;
        clearTimeout(timer);
        resolve({ kind, args, child, started: Date.now(), logs: () => out });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (!resolved) reject(new Error(`${kind} exited with ${code}: ${out}`));
    });
  });
}
