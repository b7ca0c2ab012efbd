/**
 * Actors started before NATS is up: each waits with backoff, says not-ready on /readyz and in its logs, and becomes
 * ready on its own once the server comes up, without a restart.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, startNatsServer, type NatsServerHandle } from './helpers/nats-server.js';
import { cleanEnv, runAgentmesh, CLI, startActor, type ActorProcess } from './helpers/cli.js';
import { startNatsCluster, type NatsClusterHandle } from './helpers/nats-cluster.js';
import { until } from './helpers/wait.js';

async function readyz(port: number): Promise<number | undefined> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/readyz`)).status;
  } catch {
    return undefined;
  }
}

const KINDS = ['catalog', 'planner', 'worker'] as const;

/** Starts a catalog, a planner and a worker with /readyz ports; resolves once each logs what it waits for. */
async function startWaitingFleet(env: NodeJS.ProcessEnv, waitsFor: RegExp) {
  const actors: ActorProcess[] = [];
  const healthPorts: number[] = [];
  for (const kind of KINDS) {
    const healthPort = await freePort();
    healthPorts.push(healthPort);
    actors.push(await startActor([kind, '--health-port', String(healthPort)], env, waitsFor));
  }
  return { actors, healthPorts };
}

/** Every actor alive and not ready while it waits; then, once `bringUp` resolves, ready without a restart. */
async function rideOut(
  fleet: { actors: ActorProcess[]; healthPorts: number[] },
  env: NodeJS.ProcessEnv,
  bringUp: () => Promise<void>,
): Promise<void> {
  for (const [i, actor] of fleet.actors.entries()) {
    expect(actor.logs()).toMatch(/retrying in \d+ ms/);
    expect(await readyz(fleet.healthPorts[i]!)).toBe(503);
    expect(actor.child.exitCode).toBeNull();
  }
  await bringUp();
  await until(
    'every actor ready on /readyz',
    async () => (await Promise.all(fleet.healthPorts.map(readyz))).every((c) => c === 200),
    90_000,
  );
  for (const actor of fleet.actors) expect(actor.child.exitCode).toBeNull();
  const run = await runAgentmesh(['run', '--script', 'examples/add.json', '--json', 'add 2 and 3'], {
    env,
    timeoutMs: 60_000,
  });
  expect(run.code, run.stderr).toBe(0);
  expect(run.stdout).toMatch(/"type":"run\.completed"/);
  expect(run.stdout).toMatch(/2 \+ 3 = 5/);
}

describe('actors started before NATS', () => {
  let nats: NatsServerHandle | undefined;
  let cluster: NatsClusterHandle | undefined;
  const actors: ActorProcess[] = [];

  afterAll(async () => {
    await Promise.all(actors.map((a) => a.stop('SIGKILL')));
    await nats?.dispose();
    await cluster?.dispose();
  });

  it('wait for the nats-server, answer 503 meanwhile, then become ready and complete a run', async () => {
    const natsPort = await freePort();
    const url = `nats://127.0.0.1:${natsPort}`;
    const env = cleanEnv({ NATS_URL: url });
    const fleet = await startWaitingFleet(env, /waiting for NATS at/);
    actors.push(...fleet.actors);
    for (const actor of fleet.actors) expect(actor.logs()).toContain(`waiting for NATS at ${url}`);
    await rideOut(fleet, env, async () => {
      nats = await startNatsServer({ port: natsPort });
    });
  }, 120_000);

  it('wait for a 3-node R3 cluster to elect a leader, then become ready and complete a run', async () => {
    cluster = await startNatsCluster(3, { startNodes: 1 });
    const env = cleanEnv({ NATS_URL: cluster.urls, AGENTMESH_REPLICAS: '3' });
    const fleet = await startWaitingFleet(env, /is not ready \(no cluster leader yet\?\).*retrying in/);
    actors.push(...fleet.actors);
    const rest = cluster.nodes.slice(1);
    await rideOut(fleet, env, async () => {
      await Promise.all(rest.map((n) => n.start()));
    });
  }, 180_000);
});

const giving: ChildProcess[] = [];

/** Runs an actor that must give up: resolves with its exit code and its output. */
function failingActor(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    giving.push(child);
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', (code) => resolve({ code, out }));
  });
}

describe('a permanent start-up failure still fails fast', () => {
  let nats: NatsServerHandle | undefined;
  afterAll(async () => {
    for (const child of giving) if (child.exitCode === null) child.kill('SIGKILL');
    await nats?.dispose();
  });

  it('a refused login and replicas a single server cannot hold exit with a clear message, no retry', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentmesh-bad-start-'));
    const conf = join(dir, 'nats.conf');
    writeFileSync(conf, 'authorization { user: am, password: right }\n');
    nats = await startNatsServer({ configFile: conf });
    const wrong = await failingActor(
      ['catalog'],
      cleanEnv({ NATS_URL: nats.url, NATS_USER: 'am', NATS_PASSWORD: 'wrong', LOG_LEVEL: 'info' }),
    );
    expect(wrong.code).not.toBe(0);
    expect(wrong.out).toMatch(/refused the connection: .*authorization/i);
    expect(wrong.out).not.toMatch(/retrying in/);

    const replicas = await failingActor(
      ['catalog'],
      cleanEnv({
        NATS_URL: nats.url,
        NATS_USER: 'am',
        NATS_PASSWORD: 'right',
        AGENTMESH_REPLICAS: '3',
        LOG_LEVEL: 'info',
      }),
    );
    expect(replicas.code).not.toBe(0);
    expect(replicas.out).toMatch(/replicas 3 needs a NATS cluster/);
    expect(replicas.out).not.toMatch(/retrying in/);
  }, 60_000);
});
