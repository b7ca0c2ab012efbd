import { afterEach, describe, expect, it } from 'vitest';
import { AgentMeshError, ErrorCode, publishJson, subjects, type RunEvent } from '@agentmesh/protocol';
import {
  Planner,
  UNTRUSTED_TOOL_OUTPUT_NOTICE,
  readTranscript,
  transcriptToScript,
  type RunSnapshot,
} from '@agentmesh/planner';
import { checkSequence, harness, ofType, type Harness } from './fixtures/llm/harness.js';
import {
  bigTool,
  calcTool,
  countTool,
  failTool,
  sha256Tool,
  sleepTool,
  toolSpec,
  type FakeTool,
} from './fixtures/llm/mesh.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

/** Resolves when a tool call of the run has started (its tool.started event on the bus). */
function toolStarted(harness: Harness, runId: string): Promise<void> {
  return new Promise((resolve) => {
    const sub = harness.bus.subscribe(subjects().runEvents(runId), (m) => {
      if ((JSON.parse(m.text()) as RunEvent).type !== 'tool.started') return;
      sub.unsubscribe();
      resolve();
    });
  });
}

const add = (lhs: number, rhs: number) => ({ name: 'math.calc', arguments: { lhs, rhs, op: 'add' } });

describe('planner loop (scripted provider, in-process bus)', () => {
  it('runs a multi-turn task and reports every step in order, on the bus too', async () => {
    h = harness();
    const onBus: RunEvent[] = [];
    h.bus.subscribe(subjects().runEvents('r-basic'), (m) => void onBus.push(JSON.parse(m.text())));
    const { final, events } = await h.run({
      id: 'r-basic',
      task: 'add 2 and 3',
      script: [{ tool_calls: [add(2, 3)] }, { text: 'The sum is 5.' }],
    });
    expect(final).toMatchObject({
      type: 'run.completed',
      status: 'done',
      text: 'The sum is 5.',
      iterations: 2,
      tool_calls: 1,
    });
    expect(events.map((e) => e.type)).toEqual([
      'run.accepted',
      'run.started',
      'llm.request',
      'llm.response',
      'tool.started',
      'tool.completed',
      'llm.request',
      'llm.response',
      'run.completed',
    ]);
    checkSequence(events);
    expect(onBus).toEqual(events);
    expect(ofType(events, 'run.started')[0]!.planner_id).toBe('planner-test');
    expect(ofType(events, 'llm.request')[0]!.tools).toEqual(['math.calc']);
    expect(ofType(events, 'tool.completed')[0]).toMatchObject({
      name: 'math.calc',
      worker_id: 'fake-worker',
      preview: '5',
      is_error: false,
    });
    expect(ofType(events, 'llm.response')[0]!.tool_calls[0]).toMatchObject({
      name: 'math.calc',
      arguments: { lhs: 2, rhs: 3, op: 'add' },
    });
    expect(h.mesh.invocations[0]).toMatchObject({
      run_id: 'r-basic',
      tool: 'math.calc',
      identity: { tenant: 'default' },
    });
  });

  it('dispatches the calls of one turn in parallel, bounded by tool_concurrency, one result per call in call order', async () => {
    let inFlight = 0;
    let peak = 0;
    const slow: FakeTool = {
      spec: toolSpec('test.slow_echo', 'Echoes after a pause'),
      handler: async (a: { v: number; ms: number }) => {
        peak = Math.max(peak, ++inFlight);
        await new Promise((r) => setTimeout(r, a.ms));
        inFlight--;
        return `v${a.v}`;
      },
    };
    const snapshots: RunSnapshot[] = [];
    h = harness([slow, failTool], { checkpoint: (s) => void snapshots.push(structuredClone(s)) });
    const calls = [40, 5, 30, 1, 20].map((ms, v) => ({ name: 'test__slow_echo', arguments: { v, ms } }));
    const { final, events } = await h.run({
      task: 'echo',
      limits: { tool_concurrency: 2 },
      script: [
        { tool_calls: [...calls.slice(0, 2), { name: 'test.fail', arguments: {} }, ...calls.slice(2)] },
        { text: 'ok' },
      ],
    });
    expect(final).toMatchObject({ status: 'done', tool_calls: 6 });
    expect(peak).toBe(2);
    const toolMessages = snapshots.at(-1)!.messages.filter((m) => m.role === 'tool');
    expect(
      toolMessages.map((m) => (m.role === 'tool' ? [m.call_id, m.content.slice(0, 10), m.is_error] : [])),
    ).toEqual([
      ['call_1_1', 'v0', false],
      ['call_1_2', 'v1', false],
      ['call_1_3', 'error (una', true],
      ['call_1_4', 'v2', false],
      ['call_1_5', 'v3', false],
      ['call_1_6', 'v4', false],
    ]);
    expect(ofType(events, 'tool.started')).toHaveLength(6);
    expect(ofType(events, 'tool.failed')[0]).toMatchObject({
      call_id: 'call_1_3',
      error: { code: 'unavailable' },
    });
    // a checkpoint after the model turn and after the tool batch, each with the seq reached
    expect(snapshots.map((s) => s.phase)).toEqual(['tools', 'model']);
    expect(snapshots[0]!.seq).toBeGreaterThan(0);
  });

  it('fails closed: unknown tool, tool not offered this turn, malformed JSON, non-object arguments are never executed', async () => {
    h = harness([calcTool, sha256Tool]);
    const { final, events } = await h.run({
      task: 'misbehave',
      script: [
        {
          tool_calls: [
            { id: 'c1', name: 'nope.tool', arguments: {} },
            { id: 'c2', name: 'crypto__sha256', arguments: { text: 'x' } },
            { id: 'c3', name: 'math.calc', arguments: '{"lhs": 1, "rhs": ' },
            { id: 'c4', name: 'math.calc', arguments: '[1,2]' },
            { id: 'c5', name: 'Bad-Name!', arguments: {} },
            { id: 'c6', ...add(1, 1) },
          ],
        },
        { text: 'done' },
      ],
    });
    expect(final).toMatchObject({ status: 'done', tool_calls: 1 });
    expect(h.mesh.invocations.map((i) => i.call_id)).toEqual(['c6']);
    const failed = ofType(events, 'tool.failed');
    expect(failed.map((f) => [f.call_id, f.error.code, f.worker_id])).toEqual([
      ['c1', ErrorCode.UnknownTool, 'planner-test'],
      ['c2', ErrorCode.ToolNotOffered, 'planner-test'],
      ['c3', ErrorCode.InvalidArguments, 'planner-test'],
      ['c4', ErrorCode.InvalidArguments, 'planner-test'],
      ['c5', ErrorCode.UnknownTool, 'planner-test'],
    ]);
    expect(failed[2]!.error.message).toMatch(/malformed JSON/);
    expect(failed[1]!.error.message).toMatch(/tool_search/);
    expect(ofType(events, 'tool.started').map((e) => e.call_id)).toEqual(['c6']);
    const transcript = await readTranscript(h.bus, final.run_id);
    const results = transcript!.messages.filter((m) => m.role === 'tool');
    expect(results.map((m) => (m.role === 'tool' ? [m.call_id, m.is_error] : []))).toEqual([
      ['c1', true],
      ['c2', true],
      ['c3', true],
      ['c4', true],
      ['c5', true],
      ['c6', false],
    ]);
  });

  it('promotes tools found by tool_search on the next turn, not before', async () => {
    h = harness([calcTool, sha256Tool, countTool]);
    const { final, events } = await h.run({
      task: 'hash "abc"',
      script: [
        {
          tool_calls: [
            { id: 's1', name: 'tool_search', arguments: { query: 'sha256 hash' } },
            { id: 'early', name: 'crypto__sha256', arguments: { text: 'abc' } },
          ],
        },
        { tool_calls: [{ id: 'h1', name: 'crypto__sha256', arguments: { text: 'abc' } }] },
        { text: 'ba7816bf...' },
      ],
    });
    expect(final.type === 'run.completed' && final.status).toBe('done');
    const requests = ofType(events, 'llm.request');
    expect(requests[0]!.tools).toEqual(['math.calc', 'tool_search', 'tool_get']);
    expect(requests[1]!.tools).toEqual(['math.calc', 'crypto.sha256', 'tool_search', 'tool_get']);
    expect(ofType(events, 'tool.search')[0]).toMatchObject({
      query: 'sha256 hash',
      results: ['crypto.sha256'],
      native: false,
    });
    const failed = ofType(events, 'tool.failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ call_id: 'early', error: { code: ErrorCode.ToolNotOffered } });
    expect(failed[0]!.error.message).toMatch(/next turn/);
    expect(ofType(events, 'tool.completed').find((e) => e.call_id === 'h1')!.preview).toBe(
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
  });

  it('tool_get promotes too; budget_tokens evicts the oldest promoted tool; the stub listing names deferred tools', async () => {
    h = harness([calcTool, sha256Tool, countTool], {
      defaults: { tool_search: { strategy: 'bm25', budget_tokens: 40, include_stub_listing: true } },
    });
    const { final, events } = await h.run({
      task: 'hash, then count',
      script: [
        { tool_calls: [{ name: 'tool_get', arguments: { name: 'crypto__sha256' } }] },
        { tool_calls: [{ name: 'tool_search', arguments: { query: 'count character' } }] },
        { text: 'ok' },
      ],
    });
    expect(final.type === 'run.completed' && final.status).toBe('done');
    const requests = ofType(events, 'llm.request');
    expect(requests[1]!.tools).toContain('crypto.sha256');
    expect(requests[2]!.tools).toContain('strings.count_char');
    expect(requests[2]!.tools).not.toContain('crypto.sha256');
    expect(ofType(events, 'run.notice').find((n) => n.kind === 'tools_evicted')!.details).toEqual({
      evicted: ['crypto.sha256'],
    });
    const transcript = await readTranscript(h.bus, final.run_id);
    expect(transcript!.system).toContain(UNTRUSTED_TOOL_OUTPUT_NOTICE);
    expect(transcript!.system).toContain('crypto__sha256: SHA-256 hash');
  });

  it('tool_search off loads deferred tools at once; the run allow-list and per-run deferred list are honoured', async () => {
    h = harness([calcTool, sha256Tool, countTool]);
    const off = await h.run({ task: 't', tool_search: 'off', script: [{ text: 'x' }] });
    expect(ofType(off.events, 'llm.request')[0]!.tools).toEqual([
      'math.calc',
      'crypto.sha256',
      'strings.count_char',
    ]);
    const scoped = await h.run({
      task: 't',
      tools: ['math', 'crypto'],
      deferred: ['math.*'],
      always: ['crypto.sha256'],
      script: [{ text: 'x' }],
    });
    expect(ofType(scoped.events, 'llm.request')[0]!.tools).toEqual([
      'crypto.sha256',
      'tool_search',
      'tool_get',
    ]);
  });

  it('artifact_fetch is offered once a result carries an artifact, and reads it with the run identity', async () => {
    h = harness([bigTool]);
    const { events } = await h.run({
      task: 'big',
      script: [
        { tool_calls: [{ name: 'test.big', arguments: {} }] },
        { tool_calls: [{ name: 'artifact_fetch', arguments: { ref: 'art-1', offset: 9 } }] },
        { text: 'ok' },
      ],
    });
    const requests = ofType(events, 'llm.request');
    expect(requests[0]!.tools).toEqual(['test.big']);
    expect(requests[1]!.tools).toEqual(['test.big', 'artifact_fetch']);
    expect(ofType(events, 'tool.completed')[0]!.artifact).toEqual({
      ref: 'art-1',
      mime: 'text/plain',
      size: 500,
    });
    expect(ofType(events, 'tool.completed')[1]!.preview).toContain('"text":"CONTENT"');
  });

  describe('statuses and limits', () => {
    it('stuck: too many turns with neither a tool call nor an answer', async () => {
      h = harness();
      const { final, events } = await h.run({ task: 't', limits: { max_nudges: 2 }, script: [{}, {}, {}] });
      expect(final).toMatchObject({ status: 'stuck', iterations: 3 });
      expect(ofType(events, 'run.notice').filter((n) => n.kind === 'nudge')).toHaveLength(2);
    });

    it('budget_exhausted: max_iterations', async () => {
      h = harness();
      const { final } = await h.run({
        task: 't',
        limits: { max_iterations: 2 },
        script: [{ tool_calls: [add(1, 1)] }, { tool_calls: [add(1, 2)] }, { text: 'late' }],
      });
      expect(final).toMatchObject({ status: 'budget_exhausted', iterations: 2, tool_calls: 2 });
      expect(final.type === 'run.completed' && final.reason).toMatch(/max_iterations \(2\)/);
    });

    it('budget_exhausted: max_tool_calls, excess calls refused with a result each', async () => {
      h = harness();
      const { final, events } = await h.run({
        task: 't',
        limits: { max_tool_calls: 2 },
        script: [{ tool_calls: [add(1, 1), add(1, 2), add(1, 3)] }, { text: 'x' }],
      });
      expect(final).toMatchObject({ status: 'budget_exhausted', tool_calls: 2 });
      expect(h.mesh.invocations).toHaveLength(2);
      expect(ofType(events, 'tool.failed')[0]!.error.code).toBe('budget_exhausted');
    });

    it('budget_exhausted: max_tokens and max_cost_usd (price table from configuration)', async () => {
      h = harness([calcTool], {
        prices: { 'scripted:priced': { input_per_mtok: 1_000_000, output_per_mtok: 0 } },
      });
      const usage = { input_tokens: 60, output_tokens: 10 };
      const tokens = await h.run({
        task: 't',
        limits: { max_tokens: 100 },
        script: [{ tool_calls: [add(1, 1)], usage }, { tool_calls: [add(1, 1)], usage }, { text: 'x' }],
      });
      expect(tokens.final).toMatchObject({
        status: 'budget_exhausted',
        iterations: 2,
        usage: { input_tokens: 120, output_tokens: 20 },
      });
      const cost = await h.run({
        task: 't',
        model: 'priced',
        limits: { max_cost_usd: 50 },
        script: [{ tool_calls: [add(1, 1)], usage }, { text: 'x' }],
      });
      expect(cost.final).toMatchObject({
        status: 'budget_exhausted',
        iterations: 1,
        usage: { cost_usd: 60 },
      });
      expect(cost.final.type === 'run.completed' && cost.final.reason).toMatch(/max_cost_usd/);
      expect(ofType(cost.events, 'llm.response')[0]!.usage.cost_usd).toBe(60);
    });

    it('failed: require_successful_tools unmet; done when met', async () => {
      h = harness([calcTool, failTool]);
      const unmet = await h.run({
        task: 't',
        require_successful_tools: ['test.fail'],
        limits: { max_nudges: 1 },
        script: [
          { tool_calls: [{ name: 'test.fail', arguments: {} }] },
          { text: 'I give up' },
          { text: 'still no' },
        ],
      });
      expect(unmet.final).toMatchObject({ status: 'failed' });
      expect(unmet.final.type === 'run.completed' && unmet.final.reason).toMatch(/require_successful_tools/);
      const met = await h.run({
        task: 't',
        require_successful_tools: ['math'],
        script: [{ tool_calls: [add(1, 1)] }, { text: 'ok' }],
      });
      expect(met.final).toMatchObject({ status: 'done' });
    });

    it('done: stop_after_successful_tools stops after that tool succeeds', async () => {
      h = harness();
      const { final } = await h.run({
        task: 't',
        stop_after_successful_tools: ['math.calc'],
        script: [{ text: 'adding', tool_calls: [add(1, 1)] }, { text: 'never' }],
      });
      expect(final).toMatchObject({ status: 'done', iterations: 1, text: 'adding' });
    });

    it('tool_retries re-sends a retryable failure', async () => {
      h = harness([failTool]);
      const { events } = await h.run({
        task: 't',
        tool_retries: 2,
        script: [{ tool_calls: [{ name: 'test.fail', arguments: {} }] }, { text: 'x' }],
      });
      expect(h.mesh.invocations.map((i) => i.attempt)).toEqual([1, 2, 3]);
      expect(ofType(events, 'tool.failed')[0]!.attempts).toBe(3);
      expect(ofType(events, 'tool.started')).toHaveLength(1);
    });

    it('tool_retries never re-sends a non-idempotent call after "may have run" (worker_lost); an idempotent one it does', async () => {
      const lost = (idempotent: boolean): FakeTool => ({
        spec: toolSpec(idempotent ? 'test.lost_idem' : 'test.lost', 'Loses its worker', { idempotent }),
        handler: () => {
          throw new AgentMeshError(ErrorCode.WorkerLost, 'the worker stopped and may have run it', {
            retryable: true,
          });
        },
      });
      h = harness([lost(false), lost(true)]);
      const { events } = await h.run({
        id: 'r-lost',
        task: 't',
        tool_retries: 2,
        script: [
          { tool_calls: [{ id: 'a', name: 'test__lost', arguments: {} }] },
          { tool_calls: [{ id: 'b', name: 'test__lost_idem', arguments: {} }] },
          { text: 'x' },
        ],
      });
      const byTool = (tool: string) => h!.mesh.invocations.filter((i) => i.tool === tool);
      expect(byTool('test.lost').map((i) => i.idempotency_key)).toEqual(['r-lost:1:a']);
      expect(byTool('test.lost_idem').map((i) => i.idempotency_key)).toEqual([
        'r-lost:2:b',
        'r-lost:2:b#2',
        'r-lost:2:b#3',
      ]);
      expect(ofType(events, 'tool.failed').map((e) => [e.name, e.attempts, e.error.code])).toEqual([
        ['test.lost', 1, 'worker_lost'],
        ['test.lost_idem', 3, 'worker_lost'],
      ]);
    });

    it('loop detection: warn at 2, block at 3, skip at 4 identical consecutive calls', async () => {
      const snapshots: RunSnapshot[] = [];
      h = harness([calcTool], { checkpoint: (s: RunSnapshot) => void snapshots.push(structuredClone(s)) });
      const { final, events } = await h.run({
        task: 't',
        script: [
          { tool_calls: [add(1, 1), add(1, 1)] },
          { tool_calls: [add(1, 1), add(1, 1)] },
          { text: 'x' },
        ],
      });
      expect(final).toMatchObject({ status: 'done', tool_calls: 3 });
      expect(h.mesh.invocations).toHaveLength(3);
      const results = snapshots
        .at(-1)!
        .messages.filter((m) => m.role === 'tool')
        .map((m) => (m.role === 'tool' ? m : undefined)!);
      expect(results[0]!.content).toBe('2');
      expect(results[1]!.content).toMatch(
        /^2\n\n\[agentmesh\] You have called math.calc with identical arguments 2 times/,
      );
      expect(results[2]).toMatchObject({ is_error: true });
      expect(results[2]!.content).toMatch(/blocked/);
      expect(results[3]!.content).toMatch(/not executed/);
      expect(
        ofType(events, 'run.notice')
          .filter((n) => n.kind === 'loop_detected')
          .map((n) => n.details?.['action']),
      ).toEqual(['block', 'skip']);
    });

    it('cancelled: a cancel message on runs.<id>.cancel aborts in-flight tool calls', async () => {
      h = harness([sleepTool]);
      const started = h.run({
        id: 'r-cancel',
        task: 't',
        script: [{ tool_calls: [{ name: 'test.sleep', arguments: { ms: 10_000 } }] }, { text: 'x' }],
      });
      await toolStarted(h, 'r-cancel');
      publishJson(h.bus, subjects().runCancel('r-cancel'), { reason: 'user pressed stop' });
      const { final, events } = await started;
      expect(final).toMatchObject({ status: 'cancelled' });
      expect(final.type === 'run.completed' && final.reason).toMatch(/user pressed stop/);
      expect(ofType(events, 'tool.failed')[0]!.error.code).toBe(ErrorCode.Cancelled);
      checkSequence(events);
    });

    it('cancelled through the caller signal; timeout through limits.timeout_ms', async () => {
      h = harness([sleepTool]);
      const controller = new AbortController();
      void toolStarted(h, 'r-ctrl-c').then(() => controller.abort(new Error('ctrl-c')));
      const cancelled = await h.run(
        {
          id: 'r-ctrl-c',
          task: 't',
          script: [{ tool_calls: [{ name: 'test.sleep', arguments: { ms: 10_000 } }] }],
        },
        controller.signal,
      );
      expect(cancelled.final).toMatchObject({ status: 'cancelled' });
      const timeout = await h.run({
        task: 't',
        limits: { timeout_ms: 100 },
        script: [{ tool_calls: [{ name: 'test.sleep', arguments: { ms: 10_000 } }] }],
      });
      expect(timeout.final).toMatchObject({ status: 'timeout' });
      expect(ofType(timeout.events, 'tool.failed')[0]!.error.code).toBe(ErrorCode.Timeout);
      const slowModel = await h.run({
        task: 't',
        limits: { timeout_ms: 100 },
        script: [{ text: 'late', delay_ms: 5_000 }],
      });
      expect(slowModel.final).toMatchObject({ status: 'timeout', iterations: 1 });
    });

    it('failed: a provider error (the script ran out) is a status with its reason', async () => {
      h = harness();
      const { final } = await h.run({ task: 't', script: [{ tool_calls: [add(1, 1)] }] });
      expect(final).toMatchObject({ status: 'failed' });
      expect(final.type === 'run.completed' && final.reason).toMatch(
        /^provider_error: the script has 1 turn/,
      );
    });
  });

  it('an invalid request ends as run.failed invalid_request naming the field', async () => {
    h = harness();
    const { final, events } = await h.run({ id: 'r-bad', task: '', limits: { max_iterations: 0 } });
    expect(events).toHaveLength(1);
    expect(final).toMatchObject({
      type: 'run.failed',
      run_id: 'r-bad',
      seq: 1,
      error: { code: 'invalid_request' },
    });
    expect(final.type === 'run.failed' && final.error.message).toMatch(
      /task: task must be a non-empty string/,
    );
    expect(final.type === 'run.failed' && final.error.message).toMatch(/limits\.max_iterations/);
  });

  it('a run id is run once', async () => {
    h = harness();
    await h.run({ id: 'r-once', task: 't', script: [{ text: 'x' }] });
    await expect(h.run({ id: 'r-once', task: 't', script: [{ text: 'x' }] })).rejects.toMatchObject({
      code: ErrorCode.Conflict,
    });
  });

  it('without a key or a script the run fails with invalid_config, and checkConfig says so up front', async () => {
    h = harness([calcTool], { providers: { env: {} } });
    expect(() => h!.planner.checkConfig()).toThrow(AgentMeshError);
    expect(() => h!.planner.checkConfig()).toThrow(/OPENAI_API_KEY/);
    expect(h.planner.checkConfig({ script: [{ text: 'x' }] }).kind).toBe('scripted');
    const { final, events } = await h.run({ task: 't' });
    expect(events.map((e) => e.type)).toEqual(['run.accepted', 'run.failed']);
    expect(final).toMatchObject({ error: { code: ErrorCode.InvalidConfig } });
  });

  it('a run without a catalog fails with a clear reason (after riding out catalogRetryMs)', async () => {
    h = harness([], { catalogRetryMs: 300 });
    h.mesh.stop();
    const { final } = await h.run({ task: 't', script: [{ text: 'x' }] });
    expect(final).toMatchObject({ status: 'failed' });
    expect(final.type === 'run.completed' && final.reason).toMatch(/no catalog answered/);
  });

  it('keeps a transcript another reader can fetch and replay as a script', async () => {
    h = harness();
    const request = { id: 'r-tx', task: 'add', script: [{ tool_calls: [add(2, 2)] }, { text: '4' }] };
    const { final, events } = await h.run(request);
    const transcript = await readTranscript(h.bus, 'r-tx');
    expect(transcript).toMatchObject({
      run_id: 'r-tx',
      planner_id: 'planner-test',
      status: 'done',
      provider: 'scripted',
    });
    expect(transcript!.events).toEqual(events);
    expect(transcript!.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    const replay = await h.run({ id: 'r-tx-replay', task: 'add', script: transcriptToScript(transcript!) });
    expect(replay.final).toMatchObject({
      status: 'done',
      text: (final as { text: string }).text,
      tool_calls: 1,
    });
    expect(await readTranscript(h.bus, 'missing')).toBeNull();
  });

  it('start() takes runs from runs.submit on the in-process bus', async () => {
    h = harness();
    await h.planner.start();
    const done = new Promise<RunEvent>((resolve) =>
      h!.bus.subscribe(subjects().allRunEvents, (m) => {
        const e = JSON.parse(m.text()) as RunEvent;
        if (e.type === 'run.completed') resolve(e);
      }),
    );
    const reply = await h.bus.request(
      subjects().runsSubmit,
      JSON.stringify({ id: 'r-sub', task: 't', script: [{ text: 'hi' }] }),
    );
    expect(JSON.parse(reply.text())).toEqual({ run_id: 'r-sub' });
    expect(await done).toMatchObject({ run_id: 'r-sub', status: 'done', text: 'hi' });
    const bad = await h.bus.request(subjects().runsSubmit, JSON.stringify({ task: 7 }));
    expect(JSON.parse(bad.text()).error).toMatchObject({ code: 'invalid_request' });
    const garbled = await h.bus.request(subjects().runsSubmit, '{"task": ');
    expect(JSON.parse(garbled.text()).error).toMatchObject({
      code: 'invalid_request',
      message: expect.stringMatching(/^invalid run request: not valid JSON/),
    });
    expect(new Planner({ bus: h.bus }).id).toMatch(/^planner-/);
  });
});
