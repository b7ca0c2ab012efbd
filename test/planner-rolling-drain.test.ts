/**
 * Issue 35, rolling upgrades on a real nats-server: SIGTERM on a planner process hands its run in flight to another
 * planner at the next turn boundary (not after the 10 s lease), the run ends once with no tool call made twice, and
 * the drained process exits 0. A run whose record a newer planner wrote is left alone, with one `run.warning`.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { encodeJson, type NatsBus, type RunEvent } from '@agentmesh/protocol';
import {
  ApprovalStore,
  openApprovals,
  openRunRecords,
  readRunEvents,
  readRunRecord,
  sendApprovalDecision,
  submitRun,
} from '@agentmesh/planner';
import { cleanEnv, runAgentmesh, startActor, type ActorProcess } from './helpers/cli.js';
import { calcTool, sleepTool } from './fixtures/llm/mesh.js';
import { startNatsFleet, type NatsFleet } from './helpers/fleet.js';
import { until, waitForRunEnd, waitForRunEvent } from './helpers/wait.js';

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
  fleet = await startNatsFleet(natsUrl, { prefixTag: 'drain', tools: [calcTool, sleepTool] });
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
    const b = await startActor(['planner', '--nats', natsUrl, '--prefix', prefix], cleanEnv());
    actors.push(b);
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
    const first = await waitForRunEvent(client, runId, (e) => e.type === 'run.started', {
      prefix,
      what: 'A',
    });
    expect((resumed as { planner_id: string }).planner_id).not.toBe(
      (first as { planner_id: string }).planner_id,
    );
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
    // the record is written after the final event
    const record = await until('the run record to say finished', async () => {
      const current = await readRunRecord(client, runId, { prefix });
      return current?.state === 'finished' ? current : undefined;
    });
    expect(record).toMatchObject({
      state: 'finished',
      planner_id: (resumed as { planner_id: string }).planner_id,
      schema_version: 1,
    });
    expect(await b.stop('SIGTERM')).toBe(0);
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

describe('Planner.drain({ handOff })', () => {
  let own: NatsFleet;
  let client: NatsBus;
  let prefix: string;
  beforeAll(async () => {
    own = await startNatsFleet(natsUrl, { prefixTag: 'handoff', tools: [calcTool, sleepTool] });
    ({ client, prefix } = own);
  });
  afterAll(() => own.stop());

  const recordOf = async (runId: string) => {
    const entry = await (await openRunRecords(client, prefix)).get(runId);
    return entry === null
      ? undefined
      : (JSON.parse(new TextDecoder().decode(entry.value)) as Record<string, unknown>);
  };

  it('hands a run that waits for approval over at once; the next planner applies the decision', async () => {
    const a = (await own.planner('wait-a')).planner;
    const runId = 'drain-waiting';
    await submitRun(
      client,
      {
        id: runId,
        task: 'add once approved',
        tool_search: 'off',
        approvals: { require: ['math.calc'] },
        script: [{ tool_calls: [calc('w1', 5)] }, { text: 'added' }],
      },
      { prefix },
    );
    await until(
      'the run to wait for approval on A',
      async () => (await recordOf(runId))?.waiting !== undefined,
    );
    const b = (await own.planner('wait-b')).planner;
    const started = Date.now();
    await a.drain({ handOff: true, timeoutMs: 20_000 });
    expect(Date.now() - started).toBeLessThan(5_000);
    const pending = await until('another planner to hold the waiting run', async () => {
      const r = await recordOf(runId);
      return r?.planner_id !== 'wait-a' && r?.waiting === 'awaiting_approval' ? r : undefined;
    });
    expect(pending).toMatchObject({ epoch: 2, takeovers: 1 });
    const [approval] = await listPending(client, prefix, runId);
    await sendApprovalDecision(client, runId, { approval_id: approval!, decision: 'approve' }, { prefix });
    expect(await waitForRunEnd(client, runId, { prefix })).toMatchObject({ status: 'done', text: 'added' });
    expect(own.mesh.invocations.filter((i) => i.run_id === runId).map((i) => i.call_id)).toEqual(['w1']);
    await b.drain();
  }, 40_000);

  it('hands over a run stuck in a long tool call when the drain timeout runs out', async () => {
    const a = (await own.planner('slow-a')).planner;
    const runId = 'drain-timeout';
    await submitRun(
      client,
      {
        id: runId,
        task: 'one long call',
        tool_search: 'off',
        script: [
          { tool_calls: [{ id: 's1', name: 'test.sleep', arguments: { ms: 4_000 } }] },
          { text: 'woke' },
        ],
      },
      { prefix },
    );
    await waitForRunEvent(client, runId, (e) => e.type === 'tool.started', { prefix, what: 'the long call' });
    expect(await recordOf(runId)).toMatchObject({ planner_id: 'slow-a' });
    await own.planner('slow-b');
    const started = Date.now();
    await a.drain({ handOff: true, timeoutMs: 300 });
    expect(Date.now() - started).toBeLessThan(3_000);
    const resumed = await waitForRunEvent(
      client,
      runId,
      (e) => e.type === 'run.started' && e.resumed === true,
      {
        prefix,
        what: 'the run to continue on B',
      },
    );
    expect(resumed).toMatchObject({ planner_id: 'slow-b' });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await waitForRunEnd(client, runId, { prefix })).toMatchObject({ status: 'done', text: 'woke' });
  }, 40_000);
});

/** The approval ids pending for a run. */
async function listPending(bus: NatsBus, prefix: string, runId: string): Promise<string[]> {
  const store = new ApprovalStore(await openApprovals(bus, prefix));
  return (await store.list())
    .filter((r) => r.run_id === runId && r.state === 'pending')
    .map((r) => r.approval_id);
}
