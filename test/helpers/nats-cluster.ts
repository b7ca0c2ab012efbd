import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { NATS_INSTALL_HINT, findNatsServerBinary, freePort } from './nats-server.js';
import { REPO_ROOT } from './cli.js';

const DURABLE_WORKER = join(REPO_ROOT, 'test', 'fixtures', 'durable-worker.mjs');

/** One node of a loopback NATS cluster: its own process, ports and JetStream store. */
export interface ClusterNode {
  /** Server name (n1, n2, ...), as JetStream reports leaders. */
  name: string;
  /** Client URL of this node. */
  url: string;
  port: number;
  clusterPort: number;
  /** HTTP monitoring port (`/connz`, `/jsz`). */
  monitorPort: number;
  running(): boolean;
  /** Names of the client connections this node holds now (from `/connz`). */
  clients(): Promise<string[]>;
  /** kill -9: no clean shutdown, the store stays as it was. */
  kill(): Promise<void>;
  /** Starts it again on the same ports and store; resolves once it listens. */
  start(): Promise<void>;
  /** The last lines it wrote to stderr. */
  logs(): string;
}

export interface NatsClusterHandle {
  nodes: ClusterNode[];
  /** Every node's client URL, comma-separated (the NATS_URL form). */
  urls: string;
  node(name: string): ClusterNode;
  /** Waits until JetStream answers through the live nodes and every stream named has a leader. */
  waitReady(streams?: string[], timeoutMs?: number): Promise<void>;
  /** The server name leading a stream, and its replicas as JetStream reports them. */
  streamInfo(stream: string): Promise<{ leader?: string; replicas: number; current: number }>;
  /** Every stream of the cluster (KV buckets and object stores included) with its configured replicas. */
  streamReplicas(): Promise<Map<string, number>>;
  dispose(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = tcpConnect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

interface NodePorts {
  client: number;
  cluster: number;
  monitor: number;
}

/** Where the nodes' logs are kept when AGENTMESH_CLUSTER_LOGS names a directory (debugging a failover run). */
const KEEP_LOGS = process.env['AGENTMESH_CLUSTER_LOGS'];

/** How a node's process is started: its config file, extra arguments and environment. */
interface NodeLaunch {
  conf: string;
  args?: string[];
  env?: NodeJS.ProcessEnv;
}

function nodeProcess(bin: string, name: string, launch: NodeLaunch, ports: NodePorts): ClusterNode {
  const port = ports.client;
  let child: ChildProcess | undefined;
  let stderr = '';
  const running = () => child !== undefined && child.exitCode === null && child.signalCode === null;
  const node: ClusterNode = {
    name,
    url: `nats://127.0.0.1:${port}`,
    port,
    clusterPort: ports.cluster,
    monitorPort: ports.monitor,
    running,
    clients: async () => {
      const res = await fetch(`http://127.0.0.1:${ports.monitor}/connz?limit=1024`);
      const body = (await res.json()) as { connections?: { name?: string }[] };
      return (body.connections ?? []).map((c) => c.name ?? '');
    },
    logs: () => stderr,
    start: async () => {
      if (running()) return;
      const c = spawn(bin, ['-c', launch.conf, ...(launch.args ?? [])], {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, ...launch.env },
      });
      child = c;
      c.stderr?.on('data', (d: Buffer) => {
        stderr = (stderr + d.toString()).slice(-8000);
        if (KEEP_LOGS) appendFileSync(join(KEEP_LOGS, `${name}.log`), d);
      });
      const deadline = Date.now() + 15_000;
      while (!(await listening(port))) {
        if (c.exitCode !== null) throw new Error(`nats-server ${name} exited (${c.exitCode}):\n${stderr}`);
        if (Date.now() > deadline)
          throw new Error(`nats-server ${name} not listening on ${port}:\n${stderr}`);
        await sleep(50);
      }
    },
    kill: async () => {
      const c = child;
      if (!c || !running()) return;
      await new Promise<void>((resolve) => {
        c.once('exit', () => resolve());
        c.kill('SIGKILL');
      });
    },
  };
  return node;
}

/** The route user of deploy/nats/cluster.conf: a node accepts a route only with this user and its password. */
export const ROUTE_USER = 'route';

/** Route URLs to loopback cluster ports, with `credentials` (`user:password`) when given. */
export function routeUrls(clusterPorts: number[], credentials?: string): string[] {
  const auth = credentials === undefined ? '' : `${credentials}@`;
  return clusterPorts.map((p) => `nats-route://${auth}127.0.0.1:${p}`);
}

async function nodePorts(): Promise<NodePorts> {
  return { client: await freePort(), cluster: await freePort(), monitor: await freePort() };
}

/**
 * Starts a `size`-node nats-server cluster on loopback: full routes between nodes, authorized as in
 * deploy/nats/cluster.conf (user `route`, a random password), JetStream on each with its own store, server names
 * n1..nN. Each node can be killed (-9) and started again on the same ports and store. With `startNodes` below `size`,
 * only the first nodes start and the cluster has no JetStream leader until the rest are started.
 */
export async function startNatsCluster(
  size = 3,
  options: { startNodes?: number } = {},
): Promise<NatsClusterHandle> {
  const bin = findNatsServerBinary();
  if (bin === undefined) throw new Error(NATS_INSTALL_HINT);
  const dir = mkdtempSync(join(tmpdir(), 'agentmesh-cluster-'));
  if (KEEP_LOGS) mkdirSync(KEEP_LOGS, { recursive: true });
  const ports: NodePorts[] = [];
  for (let i = 0; i < size; i++) ports.push(await nodePorts());
  const password = `p${randomBytes(12).toString('hex')}`;
  const routes = routeUrls(
    ports.map((p) => p.cluster),
    `${ROUTE_USER}:${password}`,
  )
    .map((u) => `"${u}"`)
    .join(', ');
  const authorization = `authorization { user: ${ROUTE_USER}, password: "${password}", timeout: 2 }`;
  const nodes = ports.map((p, i) => {
    const name = `n${i + 1}`;
    const store = join(dir, name);
    mkdirSync(store);
    const conf = join(dir, `${name}.conf`);
    writeFileSync(
      conf,
      [
        `server_name: ${name}`,
        `listen: "127.0.0.1:${p.client}"`,
        `http: "127.0.0.1:${p.monitor}"`,
        `jetstream { store_dir: "${store}" }`,
        ...(KEEP_LOGS && process.env['AGENTMESH_CLUSTER_DEBUG'] ? ['debug: true'] : []),
        `cluster { name: agentmesh, listen: "127.0.0.1:${p.cluster}", ${authorization}, routes: [${routes}] }`,
        '',
      ].join('\n'),
    );
    return nodeProcess(bin, name, { conf }, p);
  });
  const started = nodes.slice(0, options.startNodes ?? size);
  await Promise.all(started.map((n) => n.start()));
  const handle = clusterHandle(nodes, dir);
  if (started.length === size) await handle.waitReady();
  return handle;
}

/**
 * A cluster started from the deploy configuration itself: deploy/nats/cluster.conf (with the nats.conf it
 * includes), its cluster port moved to a free loopback port, each node given `env` (the role passwords and
 * NATS_ROUTE_PASSWORD) and NATS_ROUTES to every node with `routeCredentials`, as compose and Kubernetes do.
 * `admin` is how the handle's JetStream checks connect (user ops, inbox prefix _INBOX_ops: it may read stream info).
 */
export async function startDeployCluster(
  size: number,
  env: Record<string, string>,
  routeCredentials: string,
  admin: Partial<ConnectionOptions>,
): Promise<NatsClusterHandle & { dir: string }> {
  const bin = findNatsServerBinary();
  if (bin === undefined) throw new Error(NATS_INSTALL_HINT);
  const dir = mkdtempSync(join(tmpdir(), 'agentmesh-deploy-cluster-'));
  const deployConf = readFileSync(join(REPO_ROOT, 'deploy', 'nats', 'cluster.conf'), 'utf8');
  const listen = 'listen: "0.0.0.0:6222"';
  if (!deployConf.includes(listen)) throw new Error(`deploy/nats/cluster.conf has no ${listen}`);
  copyFileSync(join(REPO_ROOT, 'deploy', 'nats', 'nats.conf'), join(dir, 'nats.conf'));
  const ports: NodePorts[] = [];
  for (let i = 0; i < size; i++) ports.push(await nodePorts());
  const routes = `[${routeUrls(
    ports.map((p) => p.cluster),
    routeCredentials,
  )
    .map((u) => `"${u}"`)
    .join(',')}]`;
  const nodes = ports.map((p, i) => {
    const name = `n${i + 1}`;
    const conf = join(dir, `${name}.conf`);
    writeFileSync(conf, deployConf.replace(listen, `listen: "127.0.0.1:${p.cluster}"`));
    mkdirSync(join(dir, name));
    const args = ['-a', '127.0.0.1', '-p', String(p.client), '-m', String(p.monitor)];
    args.push('-js', '-sd', join(dir, name), '--name', name);
    return nodeProcess(bin, name, { conf, args, env: { ...env, NATS_ROUTES: routes } }, p);
  });
  await Promise.all(nodes.map((n) => n.start()));
  return { ...clusterHandle(nodes, dir, admin), dir };
}

/** A lone nats-server with its own cluster block that dials `routes`: a server trying to join a cluster. */
export async function startRouteCandidate(dir: string, name: string, routes: string[]): Promise<ClusterNode> {
  const bin = findNatsServerBinary();
  if (bin === undefined) throw new Error(NATS_INSTALL_HINT);
  const p = await nodePorts();
  const conf = join(dir, `${name}.conf`);
  const list = routes.map((u) => `"${u}"`).join(', ');
  writeFileSync(
    conf,
    [
      `server_name: ${name}`,
      `listen: "127.0.0.1:${p.client}"`,
      `http: "127.0.0.1:${p.monitor}"`,
      `cluster { name: agentmesh, listen: "127.0.0.1:${p.cluster}", routes: [${list}] }`,
      '',
    ].join('\n'),
  );
  const node = nodeProcess(bin, name, { conf }, p);
  await node.start();
  return node;
}

/** How many routes a node holds now (from `/routez`). */
export async function routeCount(node: ClusterNode): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${node.monitorPort}/routez`);
  return ((await res.json()) as { num_routes: number }).num_routes;
}

function clusterHandle(
  nodes: ClusterNode[],
  dir: string,
  auth: Partial<ConnectionOptions> = {},
): NatsClusterHandle {
  const withManager = async <T>(fn: (nc: NatsConnection) => Promise<T>): Promise<T> => {
    const live = nodes.filter((n) => n.running()).map((n) => n.url);
    const nc = await connect({ servers: live, timeout: 3000, maxReconnectAttempts: 0, ...auth });
    try {
      return await fn(nc);
    } finally {
      await nc.close();
    }
  };
  const streamInfo = (stream: string) =>
    withManager(async (nc) => {
      const jsm = await jetstreamManager(nc, { timeout: 3000 });
      const info = await jsm.streams.info(stream);
      const replicas = info.cluster?.replicas ?? [];
      return {
        ...(info.cluster?.leader ? { leader: info.cluster.leader } : {}),
        replicas: info.config.num_replicas,
        current: replicas.filter((r) => r.current).length + (info.cluster?.leader ? 1 : 0),
      };
    });

  const handle: NatsClusterHandle = {
    nodes,
    urls: nodes.map((n) => n.url).join(','),
    node: (name) => {
      const n = nodes.find((x) => x.name === name);
      if (!n) throw new Error(`no cluster node ${name}`);
      return n;
    },
    streamInfo,
    streamReplicas: () =>
      withManager(async (nc) => {
        const jsm = await jetstreamManager(nc, { timeout: 3000 });
        const out = new Map<string, number>();
        for await (const s of jsm.streams.list()) out.set(s.config.name, s.config.num_replicas);
        return out;
      }),
    waitReady: async (streams = [], timeoutMs = 30_000) => {
      const deadline = Date.now() + timeoutMs;
      let last: unknown;
      for (;;) {
        try {
          await withManager(async (nc) => {
            const jsm = await jetstreamManager(nc, { timeout: 3000 });
            await jsm.getAccountInfo();
            for (const s of streams) {
              if (!(await jsm.streams.info(s)).cluster?.leader) throw new Error(`stream ${s} has no leader`);
            }
          });
          return;
        } catch (error) {
          last = error;
        }
        if (Date.now() > deadline)
          throw new Error(`NATS cluster not ready in ${timeoutMs} ms: ${String(last)}`);
        await sleep(250);
      }
    },
    dispose: async () => {
      await Promise.all(nodes.map((n) => n.kill()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return handle;
}

/** Starts test/fixtures/durable-worker.mjs (builtin pack + the non-idempotent `ledger.append`); resolves when ready. */
export function startDurableWorker(env: NodeJS.ProcessEnv): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [DURABLE_WORKER], {
      cwd: REPO_ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const timer = setTimeout(() => reject(new Error(`durable-worker not ready: ${out}`)), 30_000);
    const onData = (d: Buffer) => {
      out = (out + d.toString()).slice(-4000);
      if (out.includes('"ready":true')) {
        clearTimeout(timer);
        resolve(child);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`durable-worker exited with ${code}: ${out}`));
    });
  });
}

/** Executions per `<run_id> <call_id>` in a ledger file written by durable-worker. */
export function ledgerExecutions(file: string): Map<string, number> {
  const executions = new Map<string, number>();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const [run, call] = line.split(' ');
    if (run && call) executions.set(`${run} ${call}`, (executions.get(`${run} ${call}`) ?? 0) + 1);
  }
  return executions;
}
