import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NatsBus, streamNames } from '@agentmesh/protocol';
import { startNatsServer, type NatsServerHandle } from './helpers/nats-server.js';
import { cleanEnv, runAgentmesh, startActor, type ActorProcess } from './helpers/cli.js';

/** The first hour with a fleet: what `agentmesh` says while the fleet is still being started, one actor at a time. */
describe('agentmesh against a fleet that is being started', () => {
  let nats: NatsServerHandle;
  const actors: ActorProcess[] = [];
  const env = () => cleanEnv({ NATS_URL: nats.url });
  const run = (args: string[]) => runAgentmesh(args, { env: env(), timeoutMs: 60_000 });

  beforeAll(async () => {
    nats = await startNatsServer();
  });
  afterAll(async () => {
    await Promise.all(actors.map((a) => a.stop()));
    await nats?.dispose();
  });

  it('status with no actor prints an empty fleet and exits 0, in words, not JSON', async () => {
    const r = await run(['status']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/actors: none running/);
    expect(r.stdout).not.toMatch(/[{}]/);
    expect(r.stderr).toBe('');
    const json = await run(['status', '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ actors: [] });
  });

  it('tools list with no catalog says to start one', async () => {
    const r = await run(['tools', 'list']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/no catalog answers on agentmesh\.catalog\.list: start one \(agentmesh catalog/);
  });

  it('status exits 1 and says so when NATS itself is unreachable', async () => {
    const r = await runAgentmesh(['status', '--nats', 'nats://127.0.0.1:1']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/NATS is unreachable/);
  });

  it('run --nats before any planner says no planner has set up the run stream (not "jetstream is not enabled")', async () => {
    const r = await run(['run', '--script', 'examples/add.json', 'add 2 and 3']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/no planner has set up the run stream AGENTMESH_RUNS/);
    expect(r.stderr).toMatch(/agentmesh planner/);
    expect(r.stderr).not.toMatch(/jetstream is not enabled/i);
  });

  it('run --nats refuses --workspace and says it belongs to the workers', async () => {
    const r = await run(['run', '--workspace', '.', '--script', 'examples/add.json', 'x']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--workspace does not apply to a run on NATS/);
    expect(r.stderr).toMatch(/agentmesh worker --workspace DIR/);
  });

  it('with a catalog and a planner but no worker, run --nats says no tools are registered before submitting', async () => {
    actors.push(await startActor(['catalog'], env()));
    actors.push(await startActor(['planner'], env()));
    const r = await run(['run', '--script', 'examples/add.json', '--json', 'add 2 and 3']);
    expect(r.stderr).toMatch(/warning: no tools are registered: start a worker/);
    expect(r.stderr.match(/no tools are registered/g)).toHaveLength(1);
    expect(r.stdout.trim().split('\n').at(-1)).toMatch(/"type":"run\.completed"/);
  });

  it('status shows workers in a table: worker id, host, pid, tools, in flight, uptime, version', async () => {
    const worker = await startActor(['worker'], env());
    actors.push(worker);
    const r = await run(['status']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/WORKER\s+HOST\s+PID\s+TOOLS\s+IN FLIGHT\s+UPTIME\s+VERSION/);
    expect(r.stdout).toMatch(
      new RegExp(`-${worker.child.pid}-[0-9a-f]{6}\\s+\\S+\\s+${worker.child.pid}\\s+4\\s`),
    );
    expect(r.stdout).toMatch(/1 catalog/);
    expect(r.stdout).not.toMatch(/[{}]/);
    const json = JSON.parse((await run(['status', '--json'])).stdout) as {
      actors: { kind: string; pid?: number }[];
    };
    expect(json.actors.find((a) => a.kind === 'tool-worker')?.pid).toBe(worker.child.pid);
  });

  it('following runs leaves no consumer behind on the events stream', async () => {
    const bus = await NatsBus.connect(nats.url);
    try {
      const jsm = await bus.jetstreamManager();
      const consumers = async () => (await jsm.streams.info(streamNames().events)).state.consumer_count;
      const before = await consumers();
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const id = `follow-${i}-${Date.now()}`;
        ids.push(id);
        const r = await run(['run', '--id', id, '--script', 'examples/add.json', 'add 2 and 3']);
        expect(r.code, r.stderr).toBe(0);
      }
      const show = await run(['runs', 'show', ids[0]!]);
      expect(show.code, show.stderr).toBe(0);
      expect(await consumers()).toBe(before);
    } finally {
      await bus.close();
    }
  });
});
