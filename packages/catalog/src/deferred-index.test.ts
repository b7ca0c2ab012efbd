import { afterEach, describe, expect, it, vi } from 'vitest';
import { ToolSpecSchema } from '@agentmesh/protocol';
import { DeferredIndex } from './deferred-index.js';
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
