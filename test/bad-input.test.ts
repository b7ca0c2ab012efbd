/**
 * Every subject an actor listens on, sent malformed JSON, wrong types, missing fields and oversized payloads over a
 * real nats-server: each request gets a clear error naming the field (or, for fire-and-forget subjects, is logged
 * and dropped), and afterwards the actors still complete a run. Catalog subjects have their own, deeper suite
 * (test/catalog-bad-input.test.ts).
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  NatsBus,
  TOOL_PATTERN_LIST_MAX,
  TOOL_PATTERN_MAX_LENGTH,
  silentLogger,
  subjects,
  type Bus,
} from '@agentmesh/protocol';
import { Catalog } from '@agentmesh/catalog';
import { ToolWorker, builtinTools } from '@agentmesh/tool-worker';
import { Planner } from '@agentmesh/planner';

const prefix = `bad${process.pid}`;
const s = subjects(prefix);
const enc = new TextEncoder();
const dec = new TextDecoder();

describe('bad input on every actor subject (real NATS)', () => {
  const buses: Bus[] = [];
  let raw: NatsConnection;
  let catalog: Catalog;
  let worker: ToolWorker;
  let planner: Planner;

  beforeAll(async () => {
    const url = inject('natsUrl');
    const bus = async () => {
      const b = await NatsBus.connect(url);
      buses.push(b);
      return b;
    };
    const logger = silentLogger();
    catalog = new Catalog({ bus: await bus(), prefix, logger });
    await catalog.start();
    worker = new ToolWorker({ bus: await bus(), prefix, logger, tools: builtinTools() });
    await worker.start();
    await worker.whenRegistered();
    planner = new Planner({ bus: await bus(), prefix, logger });
    await planner.start();
    raw = await connect({ servers: url });
  });

  afterAll(async () => {
    await raw?.close();
    await planner?.drain();
    await worker?.drain();
    await catalog?.stop();
    for (const b of buses) await b.close();
  });

  async function ask(
    subject: string,
    body: string | Uint8Array,
  ): Promise<{ error?: { code: string; message: string } }> {
    const reply = await raw.request(subject, typeof body === 'string' ? enc.encode(body) : body, {
      timeout: 5000,
    });
    return JSON.parse(dec.decode(reply.data)) as { error?: { code: string; message: string } };
  }

  const requestSubjects = () =>
    [
      [
        'tool.invoke.math.calc',
        s.toolInvoke('math.calc'),
        { call_id: 'c1', run_id: 'r1', tool: 'math.calc', arguments: {} },
      ],
      ['artifacts.fetch', s.artifactFetch, { ref: 'x' }],
    ] as const;

  it.each([
    ['malformed JSON', () => '{"call_id": ', /not valid JSON/],
    [
      'a wrong type',
      (valid: Record<string, unknown>) => JSON.stringify({ ...valid, [Object.keys(valid)[0]!]: 42 }),
      /invalid .*: \w+/,
    ],
    [
      'a missing field',
      (valid: Record<string, unknown>) => {
        const { [Object.keys(valid)[0]!]: _dropped, ...rest } = valid;
        return JSON.stringify(rest);
      },
      /invalid .*: \w+/,
    ],
  ] as const)('%s gets an error reply that names the problem', async (_what, make, pattern) => {
    for (const [name, subject, valid] of requestSubjects()) {
      const body = make(valid as unknown as Record<string, unknown>);
      const reply = await ask(subject, body);
      expect(reply.error, `${name}: ${JSON.stringify(reply)}`).toBeDefined();
      expect(reply.error!.message, name).toMatch(pattern);
      if (_what !== 'malformed JSON') expect(reply.error!.message, name).toContain(Object.keys(valid)[0]!);
    }
  });

  it('a payload above the NATS limit is refused before it leaves; one at the limit gets a clear error reply', async () => {
    const max = raw.info!.max_payload;
    for (const [name, subject] of requestSubjects()) {
      const over = await ask(subject, new Uint8Array(max + 1)).catch((e: Error) => e);
      expect(over, name).toBeInstanceOf(Error);
      expect((over as Error).message, name).toMatch(/max_payload/);
      const pad = 'x'.repeat(max - 100);
      const atLimit = await ask(
        subject,
        JSON.stringify({ call_id: 'c', run_id: 'r', tool: 'math.calc', ref: 'r', arguments: { pad } }).slice(
          0,
          max,
        ),
      );
      expect(atLimit.error?.message, name).toMatch(/invalid|not valid JSON|exceeds/);
    }
  });

  it('garbage on fire-and-forget subjects (cancel, run submit) is dropped without harm, and a run still completes', async () => {
    raw.publish(s.runCancel('nope'), enc.encode('{not json'));
    raw.publish(s.runCancel('nope'), enc.encode(JSON.stringify({ reason: 42 })));
    await raw.flush();
    const ack = await raw.request(s.runsSubmit, enc.encode('{"task": 5}'), { timeout: 5000 });
    expect(JSON.parse(dec.decode(ack.data))).toHaveProperty('seq');
    const final = await planner.execute({
      task: 'add',
      script: [
        { tool_calls: [{ name: 'math.calc', arguments: { lhs: 2, rhs: 3, op: 'add' } }] },
        { text: '5' },
      ],
    });
    expect(final).toMatchObject({ type: 'run.completed', status: 'done', text: '5', tool_calls: 1 });
  });

  it('tool globs built to backtrack are answered at once; oversize pattern lists are refused naming the field', async () => {
    const backtracking = '*'.repeat(40) + 'z';
    const globbed = await planner.execute({
      task: 'add',
      tools: [backtracking, '**'.repeat(30) + 'z', 'math.**'],
      deferred: [backtracking],
      always: ['*'.repeat(24) + 'z', 'math.*'],
      approvals: { auto_approve: [backtracking] },
      script: [
        { tool_calls: [{ name: 'math.calc', arguments: { lhs: 2, rhs: 3, op: 'add' } }] },
        { text: '5' },
      ],
    });
    expect(globbed).toMatchObject({ type: 'run.completed', status: 'done', tool_calls: 1 });
    const listed = await ask(s.catalogList, JSON.stringify({ allow: [backtracking, 'math.*'] }));
    expect(listed).toMatchObject({ tools: [{ name: 'math.calc' }] });

    const tooMany = Array.from({ length: TOOL_PATTERN_LIST_MAX + 1 }, (_, i) => `t${i}.*`);
    const tooLong = 'a*'.repeat(TOOL_PATTERN_MAX_LENGTH);
    for (const [request, field] of [
      [{ tools: tooMany }, /tools: a list of tool patterns must hold at most 256 entries/],
      [{ deferred: [tooLong] }, /deferred\.0: a tool pattern must be at most 128 characters/],
      [{ approvals: { require: [tooLong] } }, /approvals\.require\.0: a tool pattern must be at most 128/],
      [{ stop_after_successful_tools: tooMany }, /stop_after_successful_tools: a list of tool patterns/],
    ] as const) {
      const refused = await planner.execute({ task: 'add', ...request, script: [{ text: 'no' }] });
      expect(refused).toMatchObject({ type: 'run.failed', error: { code: 'invalid_request' } });
      expect(refused.type === 'run.failed' && refused.error.message).toMatch(field);
    }
    const catalogRefusal = await ask(s.catalogList, JSON.stringify({ always: tooMany }));
    expect(catalogRefusal.error?.message).toMatch(/always: a list of tool patterns must hold at most 256/);

    const after = await planner.execute({
      task: 'add',
      script: [
        { tool_calls: [{ name: 'math.calc', arguments: { lhs: 1, rhs: 1, op: 'add' } }] },
        { text: '2' },
      ],
    });
    expect(after).toMatchObject({ type: 'run.completed', status: 'done', text: '2', tool_calls: 1 });
  });
});
