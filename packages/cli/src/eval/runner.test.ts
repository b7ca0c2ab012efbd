import { describe, expect, it } from 'vitest';
import { AgentMeshError, ErrorCode, type RunEvent, type RunRequestInput } from '@agentmesh/protocol';
import { parseDataset } from './cases.js';
import { DEFAULT_VARIANT, parseVariants, requestFor, runEval, type ExecuteRun } from './runner.js';

const dataset = parseDataset(
  [
    { id: 'one', task: 'one', script: [{ text: 'x' }], expect: { contains: 'done one' } },
    {
      id: 'two',
      task: 'two',
      script: [{ text: 'x' }],
      expect: { contains: 'done two', tool_called: 'math.*' },
    },
    { id: 'three', task: 'three', model: 'own', expect: { contains: 'done three' } },
  ]
    .map((l) => JSON.stringify(l))
    .join('\n'),
);

const base = { seq: 1, ts: new Date().toISOString() };

/** Answers "done TASK" after a tick, calling math.calc; records what it was asked and how many ran at once. */
function fakeExecute() {
  const seen: RunRequestInput[] = [];
  let running = 0;
  let peak = 0;
  const execute: ExecuteRun = async (request, onEvent) => {
    seen.push(request);
    running++;
    peak = Math.max(peak, running);
    await new Promise((r) => setImmediate(r));
    running--;
    const run_id = request.id!;
    if (request.task === 'three') throw new AgentMeshError(ErrorCode.Unavailable, 'the fleet went away');
    onEvent({ type: 'run.started', ...base, run_id, planner_id: 'p-1' });
    onEvent({
      type: 'llm.response',
      ...base,
      run_id,
      iteration: 1,
      text: '',
      tool_calls: [{ id: 'c1', name: 'math.calc', arguments: {} }],
      usage: { input_tokens: 1, output_tokens: 1 },
    });
    return {
      type: 'run.completed',
      ...base,
      run_id,
      status: 'done',
      text: `done ${request.task}`,
      iterations: 2,
      tool_calls: 1,
      usage: { input_tokens: 3, output_tokens: 2 },
    } satisfies RunEvent;
  };
  return { execute, seen, peak: () => peak };
}

describe('parseVariants', () => {
  it('takes provider:model entries, the model after the first colon', () => {
    expect(parseVariants('openai:gpt-4.1-mini, ollama:llama3:8b,scripted')).toEqual([
      { label: 'openai:gpt-4.1-mini', provider: 'openai', model: 'gpt-4.1-mini' },
      { label: 'ollama:llama3:8b', provider: 'ollama', model: 'llama3:8b' },
      { label: 'scripted', provider: 'scripted' },
    ]);
  });

  it('refuses an unknown provider, a repeated variant and an empty list, naming --variants', () => {
    expect(() => parseVariants('openia:gpt-4o')).toThrow(
      /--variants "openia:gpt-4o": unknown provider "openia"/,
    );
    expect(() => parseVariants('openai:a,openai:a')).toThrow(/given twice/);
    expect(() => parseVariants(' , ')).toThrow(/no variant given/);
  });
});

describe('requestFor', () => {
  it("puts the variant's provider and model on the case's request, with a fresh run id", () => {
    const [one] = dataset.cases;
    const a = requestFor(one!, { label: 'openai:m', provider: 'openai', model: 'm' });
    const b = requestFor(one!, { label: 'openai:m', provider: 'openai', model: 'm' });
    expect(a).toMatchObject({ task: 'one', provider: 'openai', model: 'm' });
    expect(a.script).toBeUndefined();
    expect(a.id).toMatch(/^eval-/);
    expect(a.id).not.toBe(b.id);
    expect(requestFor(one!, { label: 'scripted:x', provider: 'scripted', model: 'x' }).script).toEqual([
      { text: 'x' },
    ]);
    expect(requestFor(dataset.cases[2]!, DEFAULT_VARIANT)).toMatchObject({ model: 'own' });
    expect(one!.request.provider).toBeUndefined();
  });
});

describe('runEval', () => {
  it('runs every case under every variant, at most N at a time, results in case order', async () => {
    const fake = fakeExecute();
    const variants = parseVariants('scripted:a,scripted:b');
    const results = await runEval(dataset.cases, variants, {
      execute: fake.execute,
      concurrency: 2,
      signal: new AbortController().signal,
    });
    expect(results.map((r) => `${r.case.id}/${r.variant}`)).toEqual([
      'one/scripted:a',
      'one/scripted:b',
      'two/scripted:a',
      'two/scripted:b',
      'three/scripted:a',
      'three/scripted:b',
    ]);
    expect(fake.peak()).toBe(2);
    expect(fake.seen.map((r) => r.model)).toEqual(['a', 'b', 'a', 'b', 'a', 'b']);
    expect(results.slice(0, 4).every((r) => r.pass)).toBe(true);
    expect(results[2]!.outcome).toMatchObject({ tools_called: ['math.calc'], turns: 2, planner_id: 'p-1' });
  });

  it('fails a case whose run throws, with the error as its reason, and goes on', async () => {
    const fake = fakeExecute();
    const results = await runEval(dataset.cases, [DEFAULT_VARIANT], {
      execute: fake.execute,
      concurrency: 1,
      signal: new AbortController().signal,
    });
    expect(results[2]!.pass).toBe(false);
    expect(results[2]!.reasons).toEqual([
      'status: expected done, got failed (unavailable: the fleet went away)',
      'contains: the final text lacks "done three"; it is ""',
    ]);
    expect(results[2]!.outcome.run_id).toBe(fake.seen[2]!.id);
  });
});
