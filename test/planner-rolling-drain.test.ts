/**
 * Issue 35, rolling upgrades on a real nats-server: SIGTERM on a planner process hands its run in flight to another
 * planner at the next turn boundary (not after the 10 s lease), the run ends once with no tool call made twice, and
 * the drained process exits 0. A run whose record a newer planner wrote is left alone, with one `run.warning`.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { encodeJson, type NatsBus, type RunEvent } from '@agentmesh/protocol';
import { openRunRecords, readRunEvents, submitRun } from '@agentmesh/planner';
import { cleanEnv, runAgentmesh, startActor, type ActorProcess } from './helpers/cli.js';
import { startNatsFleet, type NatsFleet } from './helpers/fleet.js';
import { waitForRunEnd, waitForRunEvent } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
let fleet: NatsFleet;
let prefix: string;
let client: NatsBus;
const actors: ActorProcess[] = [];

const calc = (id: string, lhs: number) => ({
  id,
  name: 'math.calc',
  arguments: { lhs, rhs: 1, op: 'add' },
});

beforeAll(async () => {
  fleet = await startNatsFleet(natsUrl, { prefixTag: 'drain' });
  ({ prefix, client } = fleet);
  fleet.onStop(async () => {
    for (const a of actors) await a.stop('SIGKILL').catch(() => undefined);
  });
});

afterAll(() => fleet.stop());

describe('SIGTERM drains a planner', () => {
  it('hands the run in flight to another planner at the next turn boundary; it ends once, A exits 0', async () => {
    const a = await startActor(
      ['planner', '--nats', natsUrl, '--prefix', prefix, '--drain-timeout', '20s'],
      cleanEnv(),
    );
    actors.push(a);
    const runId = 'drain-handoff';
    await submitRun(
      client,
      {
        id: runId,
        task: 'three turns of tools, slow model',
        tool_search: 'off',
        script: [
          { tool_calls: [calc('c1', 1)] },
          { delay_ms: 1_500, tool_calls: [calc('c2', 2)] },
          { delay_ms: 1_500, tool_calls: [calc('c3', 3)] },
          { delay_ms: 500, text: 'done' },
        ],
      },
      { prefix },
    );
    await waitForRunEvent(client, runId, (e) => e.type === 'llm.request' && e.iteration === 2, {
      prefix,
      what: 'planner A asking for turn 2',
    });
    await fleet.planner('planner-b');
    const termAt = Date.now();
    const exited = a.stop('SIGTERM');
    const resumed = await waitForRunEvent(
      client,
      runId,
      (e) => e.type === 'run.started' && e.resumed === true,
      { prefix, what: 'the run to continue on planner B' },
    );
    const handoffMs = Date.now() - termAt;
    console.log(`hand-off after SIGTERM: ${handoffMs} ms (lease 10000 ms)`);
    expect(resumed).toMatchObject({ planner_id: 'planner-b' });
    expect(handoffMs).toBeLessThan(5_000);
    expect(await exited).toBe(0);
    expect(a.logs()).toContain('handed to another planner');

    const final = await waitForRunEnd(client, runId, { prefix });
    expect(final).toMatchObject({ type: 'run.completed', status: 'done', text: 'done' });
    const events: RunEvent[] = await readRunEvents(client, runId, { prefix });
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.filter((e) => e.type === 'run.completed')).toHaveLength(1);
    const invoked = fleet.mesh.invocations.filter((i) => i.run_id === runId).map((i) => i.call_id);
    expect(invoked.sort()).toEqual(['c1', 'c2', 'c3']);
    const record = await openRunRecords(client, prefix).then((kv) => kv.get(runId));
    expect(JSON.parse(new TextDecoder().decode(record!.value))).toMatchObject({
      state: 'finished',
      planner_id: 'planner-b',
      schema_version: 1,
    });
  }, 60_000);
});

describe('a run of a newer schema version', () => {
  it('is not taken or written by this planner; it says so in one run.warning', async () => {
    const runId = 'from-the-future';
    const records = await openRunRecords(client, prefix);
    const future = {
      schema_version: 2,
      run_id: runId,
      planner_id: 'planner-v2',
      state: 'running',
      accepted_at: new Date().toISOString(),
      epoch: 3,
      lease_until: 0,
      a_field_of_v2: { kept: true },
    };
    const revision = await records.create(runId, encodeJson(future));
    await fleet.planner('planner-v1', { durability: { leaseMs: 1_000 } });
    await submitRun(
      client,
      { id: runId, task: 'written by a newer planner', script: [{ text: 'no' }] },
      { prefix },
    );
    const warning = await waitForRunEvent(client, runId, (e) => e.type === 'run.warning', {
      prefix,
      what: 'the run.warning about the newer record',
    });
    expect(warning).toMatchObject({ code: 'schema_version' });
    expect((warning as { message: string }).message).toContain('schema_version 2');
    const entry = await records.get(runId);
    expect(entry!.revision).toBe(revision);
    expect(JSON.parse(new TextDecoder().decode(entry!.value))).toEqual(future);
    const events = await readRunEvents(client, runId, { prefix });
    expect(events.map((e) => e.type)).toEqual(['run.warning']);
  }, 30_000);
});

describe('agentmesh status: versions', () => {
  it('shows which planners run which build (--version-tag, or the package version)', async () => {
    const tag = `build-2-${prefix}`;
    const next = await startActor(
      ['planner', '--nats', natsUrl, '--prefix', prefix, '--version-tag', tag],
      cleanEnv(),
    );
    actors.push(next);
    await fleet.planner('planner-old', { versionTag: `build-1-${prefix}` });
    const env = cleanEnv({ NATS_URL: natsUrl, AGENTMESH_PREFIX: prefix });
    const status = await runAgentmesh(['status', '--json'], { env, timeoutMs: 60_000 });
    expect(status.code, status.stderr).toBe(0);
    const versions = (JSON.parse(status.stdout) as { versions: VersionGroup[] }).versions;
    expect(versions.find((v) => v.version_tag === `build-1-${prefix}`)).toEqual({
      version_tag: `build-1-${prefix}`,
      schema_version: 1,
      planners: ['planner-old'],
    });
    expect(versions.find((v) => v.version_tag === tag)).toMatchObject({ schema_version: 1 });
    expect(versions.find((v) => v.version_tag === tag)?.planners).toHaveLength(1);
    const human = await runAgentmesh(['status'], { env, timeoutMs: 60_000 });
    expect(human.stdout).toContain(`  build-1-${prefix} (schema 1): 1 planner (planner-old)\n`);
    expect(human.stdout).toMatch(/^versions: /m);
    expect(await next.stop('SIGTERM')).toBe(0);
  }, 60_000);
});

interface VersionGroup {
  version_tag: string;
  schema_version: number | null;
  planners: string[];
}
