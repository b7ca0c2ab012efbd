import { afterEach, describe, expect, it, vi } from 'vitest';
import { ToolSpecSchema } from '@agentmesh/protocol';
import { DeferredIndex } from './deferred-index.js';
import { LiveTools } from './live-tools.js';
import { specHash, type WorkerRecord } from './registry.js';
import { createToolIndex } from './search/tool-index.js';

const spec = (name: string) =>
  ToolSpecSchema.parse({
    name,
    description: `the ${name} tool`,
    namespace: name.split('.')[0],
    input_schema: { type: 'object' },
    safety: {},
    timeout_ms: 1000,
    retry: { max_attempts: 1, timeout_ms: 1000, retry_on: [], backoff_ms: 0, max_backoff_ms: 0, jitter: 0 },
    idempotent: true,
    loading: 'deferred',
  });

const record = (workerId: string, ...specs: ReturnType<typeof spec>[]): WorkerRecord => ({
  worker_id: workerId,
  ttl_ms: 1000,
  registered_at: 'now',
  tools: specs.map((s) => ({ hash: specHash(s), spec: s })),
});

afterEach(() => {
  vi.useRealTimers();
});

describe('DeferredIndex', () => {
  it('catches up once changes settle, but not while a registration holds it, however long it stalls', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const index = createToolIndex();
    const deferred = new DeferredIndex(index, 50);
    deferred.set('math.add', spec('math.add'));
    vi.advanceTimersByTime(60);
    expect(index.has('math.add')).toBe(true);

    const release = deferred.hold();
    deferred.set('math.sub', spec('math.sub'));
    vi.advanceTimersByTime(500);
    expect(index.has('math.sub')).toBe(false);
    release();
    release(); // twice is once
    const second = deferred.hold();
    second();
    vi.advanceTimersByTime(60);
    expect(index.has('math.sub')).toBe(true);
  });

  it('a read catches up at once, held or not', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const deferred = new DeferredIndex(createToolIndex(), 50);
    const release = deferred.hold();
    deferred.set('math.add', spec('math.add'));
    expect(deferred.current().has('math.add')).toBe(true);
    deferred.set('math.add', null);
    expect(deferred.current().has('math.add')).toBe(false);
    release();
  });
});

describe('LiveTools', () => {
  it('answers every read with the records applied before it, though it settles them only when read', () => {
    const index = createToolIndex();
    const tools = new LiveTools(new DeferredIndex(index, 50), undefined);
    const before = tools.version();
    tools.setWorker('workers.a', record('a', spec('math.add'), spec('math.sub')), 1);
    tools.setWorker('workers.b', record('b', spec('math.add')), 2);
    expect(tools.version()).not.toBe(before);
    expect(tools.names()).toEqual(['math.add', 'math.sub']);
    expect(tools.current().get('math.add')?.tool.workers).toEqual(['a', 'b']);
    tools.setWorker('workers.a', undefined, 3);
    expect(tools.current().get('math.add')?.tool.workers).toEqual(['b']);
    expect(tools.current().has('math.sub')).toBe(false);
    // a search reads the index, which takes the live tools' changes first
    expect(tools.index.current().has('math.sub')).toBe(false);
    expect(tools.index.current().has('math.add')).toBe(true);
  });

  it('brings the search index up to date once registrations pause, with no read to prompt it', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const index = createToolIndex();
    const tools = new LiveTools(new DeferredIndex(index, 50), undefined);
    const release = tools.index.hold();
    tools.setWorker('workers.a', record('a', spec('math.add')), 1);
    vi.advanceTimersByTime(500);
    expect(index.has('math.add')).toBe(false);
    release();
    vi.advanceTimersByTime(60);
    expect(index.has('math.add')).toBe(true);
  });
});
