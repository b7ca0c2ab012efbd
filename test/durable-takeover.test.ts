/**
 * Issue 8, one run at a time on a real nats-server: a planner whose connection dies mid-run is replaced by another
 * that resumes from the checkpoint (turns and tool calls already recorded are not repeated, events stay gapless with
 * a `run.started {resumed}` marker); a finished run submitted again is not rerun; `agentmesh runs list|show|cancel`.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { NatsBus, silentLogger, streamNames, subjects, type RunEvent } from '@agentmesh/protocol';
import {
  Planner,
  checkpointsBucket,
  followRun,
  openRunRecords,
  readRunEvents,
  readRunRecord,
  readTranscript,
  submitRun,
  type RunRecord,
} from '@agentmesh/planner';
import { calcTool, sleepTool, startFakeMesh, type FakeMesh } from './fixtures/llm/mesh.js';
import { dropPrefix, uniquePrefix } from './fixtures/llm/nats.js';
import { cleanEnv, runAgentmesh } from './helpers/cli.js';

const natsUrl = inject('natsUrl');
const prefix = uniquePrefix('dt');
const LEASE_MS = 2_000;
let client: NatsBus;
let nc: NatsConnection;
let mesh: FakeMesh;
const planners: Planner[] = [];
const buses: NatsBus[] = [];

/** Follows a run's stored events until one matches; fails when the run ends first or after `timeoutMs`. */
async function eventOf(
  runId: string,
  what: string,
  match: (e: RunEvent) => boolean,
  timeoutMs = 20_000,
): Promise<RunEvent> {
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), timeoutMs);
  let found: RunEvent | undefined;
  const onEvent = (e: RunEvent) => {
    if (found !== undefined || !match(e)) return;
    found = e;
    stop.abort();
  };
  try {
    await followRun(client, runId, { prefix, onEvent, signal: stop.signal }).catch((error: unknown) => {
      if (found === undefined && !stop.signal.aborted) throw error;
    });
  } finally {
    clearTimeout(timer);
  }
  if (found === undefined) throw new Error(`${what}: not seen in run ${runId}'s events`);
  return found;
}

const isFinal = (e: RunEvent) => e.type === 'run.completed' || e.type === 'run.failed';
const finalOf = (runId: string, timeoutMs?: number) =>
  eventOf(runId, `the end of ${runId}`, isFinal, timeoutMs);

/** Watches the run records bucket until the run's record matches (a KV watch, no polling). */
async function recordOf(runId: string, match: (r: RunRecord) => boolean, timeoutMs = 20_000) {
  const kv = await openRunRecords(client, prefix);
  let watcher: { stop(): void } | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    return await new Promise<RunRecord>((resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`the record of ${runId} never matched`)), timeoutMs);
      void kv
        .watch(
          (entry) => {
            const record = JSON.parse(new TextDecoder().decode(entry.value)) as RunRecord;
            if (match(record)) resolve(record);
          },
          { key: runId },
        )
        .then((w) => (watcher = w), reject);
    });
  } finally {
    clearTimeout(timer);
    watcher?.stop();
  }
}

async function startPlanner(id: string): Promise<{ planner: Planner; bus: NatsBus }> {
  const bus = await NatsBus.connect(natsUrl);
  buses.push(bus);
  const planner = new Planner({
    bus,
    prefix,
    logger: silentLogger(),
    plannerId: id,
    durability: { leaseMs: LEASE_MS },
  });
  await planner.start();
  planners.push(planner);
  return { planner, bus };
}

const cli = (args: string[]) =>
  runAgentmesh(['runs', ...args, '--nats', natsUrl, '--prefix', prefix], { env: cleanEnv() });

beforeAll(async () => {
  client = await NatsBus.connect(natsUrl);
  nc = await connect({ servers: natsUrl });
  mesh = startFakeMesh(client, [calcTool, sleepTool], { prefix });
});

afterAll(async () => {
  for (const p of planners) await p.drain().catch(() => undefined);
  mesh.stop();
  await nc.close();
  const jsm = await client.jetstreamManager();
  await jsm.streams.delete(`KV_${checkpointsBucket(prefix)}`).catch(() => undefined);
  await dropPrefix(client, prefix);
  for (const b of buses) await b.close().catch(() => undefined);
  await client.close();
});

describe('durable runs: takeover, redelivery of finished runs, the runs command', () => {
  it('a run whose planner dies mid model call resumes on another planner from its last checkpoint', async () => {
    const a = await startPlanner('planner-a');
    const runId = 'takeover-1';
    await submitRun(
      client,
      {
        id: runId,
        task: 'two turns of tools',
        script: [
          {
            tool_calls: [
              { name: 'test.sleep', arguments: { ms: 100 } },
              { name: 'math.calc', arguments: { lhs: 6, rhs: 7, op: 'mul' } },
            ],
          },
          { delay_ms: 3_000, tool_calls: [{ name: 'math.calc', arguments: { lhs: 1, rhs: 2, op: 'add' } }] },
          { text: 'the answer is 42' },
        ],
      },
      { prefix },
    );
    await eventOf(runId, 'planner a asking for turn 2', (e) => e.type === 'llm.request' && e.iteration === 2);
    await a.bus.close();
    const died = Date.now();
    await startPlanner('planner-b');
    const final = await finalOf(runId, 30_000);
    const failoverMs = Date.now() - died;

    expect(final).toMatchObject({
      type: 'run.completed',
      status: 'done',
      text: 'the answer is 42',
      iterations: 3,
    });
    const events: RunEvent[] = await readRunEvents(client, runId, { prefix });
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    const marker = events.findIndex((e) => e.type === 'run.started' && e.resumed === true);
    expect(marker).toBeGreaterThan(0);
    expect(events[marker]).toMatchObject({ planner_id: 'planner-b' });
    expect(events.filter((e) => e.type === 'run.accepted')).toHaveLength(1);
    expect(events.filter((e) => e.type === 'run.completed')).toHaveLength(1);
    // turn 1 was answered and checkpointed before the death: not asked again; turn 2 was in flight: asked again
    expect(events.filter((e) => e.type === 'llm.response' && e.iteration === 1)).toHaveLength(1);
    expect(
      events
        .slice(marker)
        .filter((e) => e.type === 'llm.request')
        .map((e) => e.type === 'llm.request' && e.iteration),
    ).toEqual([2, 3]);
    // every tool call ran once, under its run:iteration:call idempotency key
    const keys = mesh.invocations.filter((i) => i.run_id === runId).map((i) => i.idempotency_key);
    expect(keys).toEqual([...new Set(keys)]);
    expect(keys).toHaveLength(3);
    const record = await readRunRecord(client, runId, { prefix });
    expect(record).toMatchObject({
      state: 'finished',
      status: 'done',
      planner_id: 'planner-b',
      epoch: 2,
      takeovers: 1,
    });
    const transcript = await readTranscript(client, runId, { prefix });
    expect(transcript?.events.map((e) => e.seq)).toEqual(events.map((e) => e.seq));
    expect(transcript?.messages.filter((m) => m.role === 'tool').map((m) => m.content)).toEqual([
      'slept',
      '42',
      '3',
    ]);
    console.log(`takeover after a planner death: run finished ${failoverMs} ms later (lease ${LEASE_MS} ms)`);
  }, 40_000);

  it('a finished run delivered again is acknowledged, not run again', async () => {
    const runId = 'again-1';
    const request = { id: runId, task: 't', script: [{ text: 'once' }] };
    await submitRun(client, request, { prefix });
    await finalOf(runId);
    // a plain publish without Nats-Msg-Id: the server does not deduplicate it; the run record does
    await nc.request(subjects(prefix).runsSubmit, JSON.stringify(request), { timeout: 5000 });
    const jsm = await client.jetstreamManager();
    // the planner acks the redelivery: the work-queue stream drops it (JetStream has no event for that; checked)
    for (const deadline = Date.now() + 20_000; ; await new Promise((r) => setTimeout(r, 50))) {
      if ((await jsm.streams.info(streamNames(prefix).runs)).state.messages === 0) break;
      if (Date.now() > deadline) throw new Error('the redelivered run is still in the intake');
    }
    const events = await readRunEvents(client, runId, { prefix });
    expect(events.filter((e) => e.type === 'run.started')).toHaveLength(1);
    expect(events.filter((e) => e.type === 'run.completed')).toHaveLength(1);
  });

  it('agentmesh runs list, show and cancel', async () => {
    const runId = 'cli-cancel-1';
    await submitRun(
      client,
      {
        id: runId,
        task: 'wait a long time',
        script: [
          { tool_calls: [{ name: 'test.sleep', arguments: { ms: 2_500 } }] },
          { tool_calls: [{ name: 'test.sleep', arguments: { ms: 20_000 } }] },
        ],
      },
      { prefix },
    );
    let sleeps = 0;
    await eventOf(runId, 'the second sleep starting', (e) => e.type === 'tool.started' && ++sleeps === 2);
    const listed = await cli(['list', '--state', 'running', '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    expect((JSON.parse(listed.stdout) as { run_id: string }[]).map((r) => r.run_id)).toContain(runId);

    const cancelled = await cli(['cancel', runId, '--reason', 'enough']);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(cancelled.stdout).toMatch(/cancel sent/);
    const final = await finalOf(runId);
    expect(final).toMatchObject({ type: 'run.completed', status: 'cancelled' });

    // the transcript is saved before the record says finished
    await recordOf(runId, (r) => r.state === 'finished');
    const show = await cli(['show', runId, '--json']);
    expect(show.code, show.stderr).toBe(0);
    const shown = JSON.parse(show.stdout) as {
      record: { state: string };
      events: RunEvent[];
      transcript: { status: string } | null;
    };
    expect(shown.record.state).toBe('finished');
    expect(shown.transcript?.status).toBe('cancelled');
    expect(shown.events.at(-1)).toMatchObject({ type: 'run.completed', status: 'cancelled' });
    const human = await cli(['show', 'takeover-1']);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/run takeover-1: finished \(done\).*resumed 1x/);
    expect(human.stdout).toMatch(/resumed on planner planner-b/);

    const unknown = await cli(['show', 'no-such-run']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/no run "no-such-run"/);
    const usage = await cli(['frobnicate']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(
      /unknown subcommand "frobnicate": runs takes list, show, cancel, trigger, pending, approve, deny, input, pause, resume/,
    );
  }, 40_000);
});
