/**
 * Issue 35, versioned state: the golden files of test/fixtures/durable are what a planner of the format before
 * `schema_version` wrote in real runs (see capture.mjs there). This code reads every one of them as schema version 1,
 * and the run they describe resumes from them: a planner takes the run over from the stored record and checkpoint,
 * finds its pending approval, and finishes it once approved; a session continues; a queued trigger is taken.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { encodeJson, openRunEventLog, subjects, type NatsBus, type RunEvent } from '@agentmesh/protocol';
import {
  ApprovalStore,
  SessionStore,
  TriggerQueue,
  openApprovals,
  openCheckpoints,
  openRunRecords,
  openSessionStores,
  transcriptsBucket,
  openTriggerStore,
  readCheckpoint,
  readRunRecord,
  readRunEvents,
  readTranscript,
  schemaVersionOf,
  sendApprovalDecision,
  submitRun,
} from '@agentmesh/planner';
import { sleepTool } from './fixtures/llm/mesh.js';
import { REPO_ROOT } from './helpers/cli.js';
import { startNatsFleet, type NatsFleet } from './helpers/fleet.js';
import { until, waitForRunEnd } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
const GOLDEN = join(REPO_ROOT, 'test', 'fixtures', 'durable');
const golden = (name: string): Record<string, any> =>
  JSON.parse(readFileSync(join(GOLDEN, name), 'utf8')) as Record<string, any>;
const NAMES = [
  'run-record.json',
  'run-record-finished.json',
  'checkpoint.json',
  'approval.json',
  'session.json',
  'transcript.json',
  'trigger.json',
  'trigger-queue.json',
];

let fleet: NatsFleet;
let prefix: string;
let client: NatsBus;

beforeAll(async () => {
  fleet = await startNatsFleet(natsUrl, { prefixTag: 'golden', tools: [sleepTool] });
  ({ prefix, client } = fleet);
});

afterAll(() => fleet.stop());

describe('golden files of the durable formats', () => {
  it('carry no schema_version (the format before it): each reads as version 1', () => {
    for (const name of NAMES) {
      expect(golden(name), name).not.toHaveProperty('schema_version');
      expect(schemaVersionOf(golden(name)), name).toBe(1);
    }
  });

  it('decode: run records, checkpoint, transcript, session and trigger queue', async () => {
    const records = await openRunRecords(client, prefix);
    await records.put('golden-finished', encodeJson(golden('run-record-finished.json')));
    expect(await readRunRecord(client, 'golden-finished', { prefix })).toMatchObject({
      state: 'finished',
      status: 'done',
    });
    const checkpoints = await openCheckpoints(client, prefix, 3_600_000);
    await checkpoints.put('golden-cp', encodeJson(golden('checkpoint.json')));
    const stored = await readCheckpoint(checkpoints, 'golden-cp');
    expect(stored?.checkpoint.snapshot).toMatchObject({ run_id: 'golden-approval', phase: 'tools' });
    const transcripts = await client.blobs(transcriptsBucket(prefix));
    await transcripts.put('golden-approval', encodeJson(golden('transcript.json')), {
      mime: 'application/json',
    });
    const transcript = await readTranscript(client, 'golden-approval', { prefix });
    expect(transcript?.status).toBe('done');
    expect(transcript?.events.at(-1)).toMatchObject({ type: 'run.completed', text: 'slept' });
    const queue = new TriggerQueue(await openTriggerStore(client, prefix));
    const kv = await openTriggerStore(client, prefix);
    await kv.put('golden-daemon.meta', encodeJson(golden('trigger-queue.json')));
    await kv.put('golden-daemon.q.000000000002', encodeJson(golden('trigger.json')));
    expect(await queue.next('golden-daemon', 1)).toEqual({ seq: 2, trigger: golden('trigger.json') });
    expect(await queue.depth('golden-daemon')).toBe(1);
  });

  it('resume: a planner takes the golden run over from its record, checkpoint and pending approval', async () => {
    const runId = 'golden-approval';
    const record = golden('run-record.json');
    await (await openRunRecords(client, prefix)).put(runId, encodeJson({ ...record, lease_until: 0 }));
    // a run's timeout counts from its first start: the frozen run would have timed out by now
    const frozen = golden('checkpoint.json');
    const fresh = { ...frozen, snapshot: { ...frozen.snapshot, started_at: new Date().toISOString() } };
    await (await openCheckpoints(client, prefix, 3_600_000)).put(runId, encodeJson(fresh));
    const approval = golden('approval.json');
    const approvals = await openApprovals(client, prefix);
    await approvals.put(`${runId}.${approval.approval_id}`, encodeJson(approval));
    expect(await new ApprovalStore(approvals).get(runId, approval.approval_id)).toMatchObject({
      state: 'pending',
      call_id: 'call-1',
    });
    // the events stored before the checkpoint: the golden transcript holds them (the same run, as it went on)
    const checkpoint = golden('checkpoint.json');
    const log = await openRunEventLog(client, prefix);
    for (const e of golden('transcript.json').events.filter(
      (e: RunEvent) => e.seq <= checkpoint.snapshot.seq,
    ))
      await log.append(subjects(prefix).runEvents(runId), e.seq, encodeJson(e));
    await fleet.planner('planner-next');
    await submitRun(client, checkpoint.snapshot.request, { prefix });
    await until('the resumed run to wait for the golden approval', async () => {
      const current = await readRunRecord(client, runId, { prefix });
      return current?.epoch === 2 && current.waiting === 'awaiting_approval' ? true : undefined;
    });
    await sendApprovalDecision(
      client,
      runId,
      { approval_id: approval.approval_id, decision: 'approve' },
      { prefix },
    );
    const final = await waitForRunEnd(client, runId, { prefix });
    expect(final).toMatchObject({ type: 'run.completed', status: 'done', text: 'slept' });
    const events = await readRunEvents(client, runId, { prefix });
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.filter((e) => e.type === 'run.started').map((e) => e.resumed === true)).toEqual([
      false,
      true,
    ]);
    expect(fleet.mesh.invocations.filter((i) => i.run_id === runId).map((i) => i.call_id)).toEqual([
      'call-1',
    ]);
    expect(await readRunRecord(client, runId, { prefix })).toMatchObject({
      state: 'finished',
      epoch: 2,
      takeovers: 1,
      schema_version: 1,
    });
  }, 30_000);

  it('continue: a run continues the golden session', async () => {
    const session = golden('session.json');
    const { blobs, meta } = await openSessionStores(client, prefix);
    const store = new SessionStore(blobs, meta);
    await store.save(session as never);
    const read = await store.get(session.tenant, session.session);
    expect(read?.messages).toEqual(session.messages);
    await fleet.planner('planner-sessions');
    await submitRun(
      client,
      { id: 'golden-session-2', task: 'again', session: session.session, script: [{ text: 'hello again' }] },
      { prefix },
    );
    const final = await waitForRunEnd(client, 'golden-session-2', { prefix });
    expect(final).toMatchObject({ type: 'run.completed', status: 'done' });
    const continued = await until('the session to record the second run', async () => {
      const current = await store.get(session.tenant, session.session);
      return current !== undefined && current.runs.length > session.runs.length ? current : undefined;
    });
    expect(continued?.runs).toEqual([...session.runs, 'golden-session-2']);
    expect(continued?.messages.slice(0, session.messages.length)).toEqual(session.messages);
  }, 30_000);
});
