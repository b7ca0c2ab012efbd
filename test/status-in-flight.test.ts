import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NatsBus } from '@agentmesh/protocol';
import { startNatsServer, type NatsServerHandle } from './helpers/nats-server.js';
import { cleanEnv, runAgentmesh, startActor, type ActorProcess } from './helpers/cli.js';

const GATED_WORKER = fileURLToPath(new URL('./fixtures/gated-worker.mjs', import.meta.url));
const GATED_RUN = fileURLToPath(new URL('./fixtures/gated-run.json', import.meta.url));

interface StatusJson {
  actors: { kind: string; worker_id?: string; in_flight?: number }[];
}

function startGatedWorker(natsUrl: string): Promise<{ child: ChildProcess; workerId: string }> {
  const child = spawn(process.execPath, [GATED_WORKER, natsUrl], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: cleanEnv(),
  });
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gated worker not ready:\n${output}`)), 30_000);
    const onData = (d: Buffer) => {
      output += d.toString();
      const ready = /\{"ready":true,"worker_id":"([^"]+)"/.exec(output);
      if (ready === null) return;
      clearTimeout(timer);
      resolve({ child, workerId: ready[1]! });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`gated worker exited with ${code}:\n${output}`)));
  });
}

/** `agentmesh status` against a fleet whose one tool call is held at a gate the test opens. */
describe('agentmesh status reports calls and runs in flight', () => {
  let nats: NatsServerHandle;
  let bus: NatsBus;
  let worker: { child: ChildProcess; workerId: string };
  const actors: ActorProcess[] = [];
  const env = () => cleanEnv({ NATS_URL: nats.url });
  const status = async (): Promise<StatusJson> => {
    const r = await runAgentmesh(['status', '--json'], { env: env(), timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as StatusJson;
  };
  const inFlight = (s: StatusJson, kind: string) => s.actors.find((a) => a.kind === kind)?.in_flight;

  beforeAll(async () => {
    nats = await startNatsServer();
    bus = await NatsBus.connect(nats.url);
    actors.push(await startActor(['catalog'], env()));
    actors.push(await startActor(['planner'], env()));
    worker = await startGatedWorker(nats.url);
  }, 120_000);
  afterAll(async () => {
    worker?.child.kill('SIGTERM');
    await Promise.all(actors.map((a) => a.stop()));
    await bus?.close();
    await nats?.dispose();
  });

  it('shows 1 call in flight on the worker and 1 run on the planner while the call waits, 0 after', async () => {
    expect(inFlight(await status(), 'tool-worker')).toBe(0);
    const entered = new Promise<void>((resolve) => {
      const sub = bus.subscribe('test.gate.entered', () => {
        sub.unsubscribe();
        resolve();
      });
    });
    await bus.flush();
    const run = runAgentmesh(['run', '--script', GATED_RUN, 'wait at the gate'], {
      env: env(),
      timeoutMs: 90_000,
    });
    await entered;

    const held = await status();
    expect(held.actors.find((a) => a.kind === 'tool-worker')).toMatchObject({
      worker_id: worker.workerId,
      in_flight: 1,
    });
    expect(inFlight(held, 'planner')).toBe(1);
    const human = await runAgentmesh(['status'], { env: env(), timeoutMs: 60_000 });
    expect(human.stdout).toMatch(new RegExp(`${worker.workerId}\\s+\\S+\\s+\\d+\\s+1\\s+1\\s`));
    expect(human.stdout).toMatch(/planner \S+, up \S+, 1 run in flight/);

    bus.publish('test.gate.open', '');
    const done = await run;
    expect(done.code, done.stderr).toBe(0);
    expect(done.stdout).toMatch(/The gate opened/);
    let after = await status();
    for (let i = 0; i < 20 && (inFlight(after, 'planner') ?? 1) > 0; i++) after = await status();
    expect(inFlight(after, 'tool-worker')).toBe(0);
    expect(inFlight(after, 'planner')).toBe(0);
  }, 180_000);
});
