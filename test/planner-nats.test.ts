import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  Header,
  NatsBus,
  createEnvelope,
  encodeJson,
  envelopeToNatsHeaders,
  silentLogger,
  streamNames,
  subjects,
  type RunEvent,
} from '@agentmesh/protocol';
import { Planner, followRun, readRunRecord, readTranscript, submitRun } from '@agentmesh/planner';
import { calcTool, sleepTool, startFakeMesh, type FakeMesh } from './fixtures/llm/mesh.js';
import { dropPrefix, uniquePrefix } from './fixtures/llm/nats.js';
import { EventBoard } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
const prefix = uniquePrefix('pn');
const s = subjects(prefix);
let bus: NatsBus;
let nc: NatsConnection;
let mesh: FakeMesh;
let planner: Planner;
const board = new EventBoard();

const eventsOf = (runId: string) => board.of(runId);
const until = <T>(what: string, check: () => T | undefined, timeoutMs = 10000) =>
  board.until(what, check, { timeoutMs });

const finalOf = (runId: string) =>
  eventsOf(runId).find((e) => e.type === 'run.completed' || e.type === 'run.failed');

beforeAll(async () => {
  bus = await NatsBus.connect(natsUrl);
  nc = await connect({ servers: natsUrl });
  mesh = startFakeMesh(bus, [calcTool, sleepTool], { prefix });
  planner = new Planner({ bus, prefix, logger: silentLogger(), plannerId: 'planner-nats' });
  await planner.start();
  nc.subscribe(s.allRunEvents, {
    callback: (_err, msg) => {
      const e = msg.json<RunEvent>();
      board.add(e);
    },
  });
  await nc.flush();
});

afterAll(async () => {
  await planner.drain();
  mesh.stop();
  await nc.close();
  await dropPrefix(bus, prefix);
  await bus.close();
});

describe('planner on NATS (JetStream intake)', () => {
  it('takes a raw JSON request from a plain client (reply is the PubAck) and publishes its events to the stream', async () => {
    const request = {
      id: 'raw-1',
      task: 'add',
      script: [
        { tool_calls: [{ name: 'math__calc', arguments: { lhs: 20, rhs: 22, op: 'add' } }] },
        { text: '42' },
      ],
    };
    const ack = await nc.request(s.runsSubmit, JSON.stringify(request), { timeout: 5000 });
    expect(ack.json<{ stream: string; seq: number }>()).toMatchObject({ stream: streamNames(prefix).runs });
    const final = await until('raw-1 to finish', () => finalOf('raw-1'));
    expect(final).toMatchObject({ type: 'run.completed', status: 'done', text: '42' });
    expect(eventsOf('raw-1').map((e) => e.seq)).toEqual(eventsOf('raw-1').map((_, i) => i + 1));
    // the stream keeps them for replay, in order
    const replayed: RunEvent[] = [];
    const again = await followRun(bus, 'raw-1', { prefix, onEvent: (e) => replayed.push(e) });
    expect(again).toEqual(final);
    expect(replayed).toEqual(eventsOf('raw-1'));
    expect(await readRunRecord(bus, 'raw-1', { prefix })).toMatchObject({
      state: 'finished',
      status: 'done',
      planner_id: 'planner-nats',
    });
    expect((await readTranscript(bus, 'raw-1', { prefix }))!.messages).toHaveLength(4);
  });

  it('an invalid request without an id ends as run.failed under an id derived from the stream sequence', async () => {
    const ack = (
      await nc.request(s.runsSubmit, JSON.stringify({ task: '', tools: 'fs' }), { timeout: 5000 })
    ).json<{ seq: number }>();
    const runId = `run-seq-${ack.seq}`;
    const final = await until('the invalid run to fail', () => finalOf(runId));
    expect(eventsOf(runId)).toHaveLength(1);
    expect(final).toMatchObject({ type: 'run.failed', seq: 1, error: { code: 'invalid_request' } });
    expect(final.type === 'run.failed' && final.error.message).toMatch(/task: .*tools: /);
    const notJson = (await nc.request(s.runsSubmit, '{"task": ', { timeout: 5000 })).json<{ seq: number }>();
    const broken = await until('the non-JSON run to fail', () => finalOf(`run-seq-${notJson.seq}`));
    expect(broken.type === 'run.failed' && broken.error.message).toMatch(/not valid JSON/);
  });

  it('a duplicate run id is not run twice (server dedup by Nats-Msg-Id, and the run record for plain resubmits)', async () => {
    const request = { id: 'dup-1', task: 't', script: [{ text: 'once' }] };
    const first = await submitRun(bus, request, { prefix });
    const second = await submitRun(bus, request, { prefix });
    expect(second).toMatchObject({ run_id: 'dup-1', duplicate: true, seq: first.seq });
    await until('dup-1 to finish', () => finalOf('dup-1'));
    await nc.request(s.runsSubmit, JSON.stringify(request), { timeout: 5000 });
    const jsm = await bus.jetstreamManager();
    for (let i = 0; i < 100; i++) {
      const info = await jsm.consumers.info(streamNames(prefix).runs, 'agentmesh-planner');
      if (info.num_pending === 0 && info.num_ack_pending === 0) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    // events of the same planner arrive in order: once a run submitted after the duplicate has finished, a second
    // run of dup-1 would have shown up
    await submitRun(bus, { id: 'dup-marker', task: 't', script: [{ text: 'after' }] }, { prefix });
    await until('the marker run to finish', () => finalOf('dup-marker'));
    expect(eventsOf('dup-1').filter((e) => e.type === 'run.started')).toHaveLength(1);
    expect(eventsOf('dup-1').filter((e) => e.type === 'run.completed')).toHaveLength(1);
  });

  it('cancel over NATS ends the run as cancelled and aborts its tool call', async () => {
    const watch = followRun(bus, 'cancel-1', { prefix });
    await submitRun(
      bus,
      {
        id: 'cancel-1',
        task: 't',
        script: [{ tool_calls: [{ name: 'test.sleep', arguments: { ms: 20_000 } }] }],
      },
      { prefix },
    );
    await until('the tool to start', () => eventsOf('cancel-1').find((e) => e.type === 'tool.started'));
    nc.publish(s.runCancel('cancel-1'), JSON.stringify({ reason: 'enough' }));
    const final = await watch;
    expect(final).toMatchObject({ type: 'run.completed', status: 'cancelled' });
    expect(final.type === 'run.completed' && final.reason).toMatch(/enough/);
  });
});

describe('envelope on the run intake', () => {
  it('a run submitted with identity only in its envelope headers is scoped to that tenant', async () => {
    const headers = envelopeToNatsHeaders(createEnvelope({ tenant: 'acme', user: 'ana' }));
    expect(headers.get(Header.Tenant)).toBe('acme');
    await bus
      .jetstream()
      .publish(s.runsSubmit, encodeJson({ id: 'env-run-1', task: 'hi', script: [{ text: 'hello' }] }), {
        headers,
        msgID: 'env-run-1',
      });
    const final = await until('env-run-1 to finish', () => finalOf('env-run-1'));
    expect(final).toMatchObject({ type: 'run.completed', status: 'done' });
    expect(eventsOf('env-run-1').find((e) => e.type === 'run.accepted')).toMatchObject({
      identity: { tenant: 'acme', user: 'ana' },
    });
  });
});

describe('run warnings over NATS', () => {
  it('a tools entry that matches no registered tool gets a run.warning naming it; the run still goes on', async () => {
    await submitRun(
      bus,
      { id: 'warn-scope-1', task: 't', tools: ['math', 'mat.calc'], script: [{ text: 'fine' }] },
      { prefix },
    );
    const final = await until('warn-scope-1 to finish', () => finalOf('warn-scope-1'));
    expect(final).toMatchObject({ type: 'run.completed', status: 'done' });
    const warnings = eventsOf('warn-scope-1').filter((e) => e.type === 'run.warning');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ code: 'unknown_tool_scope' });
    expect(warnings[0]!.type === 'run.warning' && warnings[0]!.message).toMatch(
      /"mat\.calc" matches no registered tool; closest known: math\.calc/,
    );
  });
});
