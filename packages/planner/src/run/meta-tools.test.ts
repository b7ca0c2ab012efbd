import { MemoryBus, ToolSpecSchema, subjects as subjectsOf, type ToolSpec } from '@agentmesh/protocol';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ToolListCache, loadRunTools } from './meta-tools.js';

/** A spec as the catalog serves it: every default filled in (safety flags all false). */
const spec: ToolSpec = ToolSpecSchema.parse({
  name: 'math.calc',
  description: 'adds',
  namespace: 'math',
  input_schema: { type: 'object' },
  safety: {},
  timeout_ms: 1000,
  retry: {
    max_attempts: 1,
    timeout_ms: 1000,
    retry_on: [],
    backoff_ms: 100,
    max_backoff_ms: 1000,
    jitter: 0,
  },
  idempotent: true,
  loading: 'always',
});

const subjects = subjectsOf('metatest');
let bus = new MemoryBus();
beforeEach(() => {
  bus = new MemoryBus();
});
afterEach(() => bus.close());

describe('loadRunTools: the catalog list reply', () => {
  const catalogAnswering = (reply: unknown) =>
    bus.subscribe(subjects.catalogList, (msg) => {
      bus.respond(msg, JSON.stringify(reply));
    });
  const load = () => loadRunTools(bus, subjects, {}, { signal: new AbortController().signal, retryForMs: 0 });

  it('returns the specs of a reply that passes the compiled check as they came', async () => {
    const sub = catalogAnswering({ tools: [], specs: [spec] });
    expect(await load()).toEqual([spec]);
    sub.unsubscribe();
  });

  it('fills the defaults of a reply without them (zod, after the compiled check refused it)', async () => {
    const { cpu_bound: _c, tags: _t, version: _v, ...bare } = spec;
    const sub = catalogAnswering({ tools: [], specs: [bare] });
    expect(await load()).toEqual([spec]);
    sub.unsubscribe();
  });

  it('refuses a spec whose name breaks the tool-name rule, naming the field', async () => {
    const sub = catalogAnswering({ tools: [], specs: [{ ...spec, name: 'bad name!' }] });
    await expect(load()).rejects.toThrow(/specs\.0\.name/);
    sub.unsubscribe();
  });
});

describe('loadRunTools with a cache: runs of an unchanged catalog get its last list', () => {
  /** A catalog that answers `unchanged` to its current version, and records what each request sent. */
  const versionedCatalog = () => {
    const state = {
      version: 'v1',
      specs: [spec],
      requests: [] as Record<string, unknown>[],
      sub: undefined as { unsubscribe(): void } | undefined,
    };
    state.sub = bus.subscribe(subjects.catalogList, (msg) => {
      const body = JSON.parse(msg.text()) as Record<string, unknown>;
      state.requests.push(body);
      const reply =
        body['cached'] === state.version
          ? { tools: [], unchanged: true, version: state.version }
          : { tools: [], specs: state.specs, version: state.version };
      bus.respond(msg, JSON.stringify(reply));
    });
    return state;
  };
  const load = (cache: ToolListCache, scope: Record<string, string[]> = {}) =>
    loadRunTools(bus, subjects, scope, { signal: new AbortController().signal, retryForMs: 0, cache });

  it('sends the cached version back and reuses the list while the catalog says unchanged', async () => {
    const catalog = versionedCatalog();
    const cache = new ToolListCache();
    const first = await load(cache);
    expect(first).toEqual([spec]);
    first.push({ ...spec, name: 'run.local' });
    expect(await load(cache)).toEqual([spec]);
    expect(catalog.requests.map((r) => r['cached'])).toEqual([undefined, 'v1']);
  });

  it('asks again without cached when a catalog from before it refuses the member', async () => {
    const catalog = versionedCatalog();
    const cache = new ToolListCache();
    await load(cache);
    catalog.sub?.unsubscribe();
    const asked: Record<string, unknown>[] = [];
    bus.subscribe(subjects.catalogList, (msg) => {
      const body = JSON.parse(msg.text()) as Record<string, unknown>;
      asked.push(body);
      if ('cached' in body)
        bus.respond(
          msg,
          JSON.stringify({
            error: {
              code: 'invalid_message',
              message: 'invalid list: (root): Unrecognized key: "cached"',
              retryable: false,
            },
          }),
          { headers: { 'am-status': 'error' } },
        );
      else bus.respond(msg, JSON.stringify({ tools: [], specs: [spec] }));
    });
    expect(catalog.requests).toHaveLength(1);
    expect(await load(cache)).toEqual([spec]);
    expect(asked.map((r) => 'cached' in r)).toEqual([true, false]);
  });

  it('takes the new list when the catalog changed, and keeps one list per scope', async () => {
    const catalog = versionedCatalog();
    const cache = new ToolListCache();
    await load(cache);
    const added = { ...spec, name: 'math.mul' };
    catalog.version = 'v2';
    catalog.specs = [spec, added];
    expect(await load(cache)).toEqual([spec, added]);
    expect(await load(cache, { allow: ['math.*'] })).toEqual([spec, added]);
    expect(await load(cache)).toEqual([spec, added]);
    expect(catalog.requests.map((r) => r['cached'])).toEqual([undefined, 'v1', undefined, 'v2']);
  });
});

describe('loadRunTools with a cache: runs of one scope set up together share one list request', () => {
  /** A catalog that holds every list request until `answer` is called, counting them. */
  const heldCatalog = () => {
    const held: { reply: () => void }[] = [];
    const requests: Record<string, unknown>[] = [];
    bus.subscribe(subjects.catalogList, (msg) => {
      requests.push(JSON.parse(msg.text()) as Record<string, unknown>);
      held.push({
        reply: () => bus.respond(msg, JSON.stringify({ tools: [], specs: [spec], version: 'v1' })),
      });
    });
    return {
      requests,
      answer: () => held.splice(0).forEach((h) => h.reply()),
      asked: () => expect.poll(() => requests.length).toBeGreaterThan(0),
    };
  };
  const load = (cache: ToolListCache, signal: AbortSignal, scope: Record<string, string[]> = {}) =>
    loadRunTools(bus, subjects, scope, { signal, retryForMs: 0, cache });

  it('asks the catalog once for runs of one scope loading at the same time, each with a list of its own', async () => {
    const catalog = heldCatalog();
    const cache = new ToolListCache();
    const signal = new AbortController().signal;
    const lists = Array.from({ length: 5 }, () => load(cache, signal));
    const other = load(cache, signal, { allow: ['math.*'] });
    await catalog.asked();
    catalog.answer();
    const got = await Promise.all(lists);
    expect(got.every((l) => l.length === 1 && l[0]!.name === 'math.calc')).toBe(true);
    got[0]!.push({ ...spec, name: 'run.local' });
    expect(got[1]).toHaveLength(1);
    expect(await other).toEqual([spec]);
    expect(catalog.requests).toHaveLength(2);
    // once the list has landed, the next run asks again (with the version it got)
    const next = load(cache, signal);
    await expect.poll(() => catalog.requests.length).toBe(3);
    catalog.answer();
    expect(await next).toEqual([spec]);
    expect(catalog.requests[2]?.['cached']).toBe('v1');
  });

  it('a run that stops stops waiting alone; the request is dropped once no run waits for it', async () => {
    const catalog = heldCatalog();
    const cache = new ToolListCache();
    const stopped = new AbortController();
    const staying = load(cache, new AbortController().signal);
    const leaving = load(cache, stopped.signal);
    await catalog.asked();
    stopped.abort(new Error('run cancelled'));
    await expect(leaving).rejects.toMatchObject({ code: 'cancelled' });
    catalog.answer();
    expect(await staying).toEqual([spec]);

    const alone = new AbortController();
    const dropped = load(cache, alone.signal);
    await expect.poll(() => catalog.requests.length).toBe(2);
    alone.abort(new Error('run cancelled'));
    await expect(dropped).rejects.toMatchObject({ code: 'cancelled' });
    // a run after it does not join the dropped request: it sends its own
    const after = load(cache, new AbortController().signal);
    await expect.poll(() => catalog.requests.length).toBe(3);
    catalog.answer();
    expect(await after).toEqual([spec]);
  });
});

describe('ToolListCache.join', () => {
  it('aborts the shared load only once every run waiting for it has stopped', async () => {
    const cache = new ToolListCache();
    let loadSignal: AbortSignal | undefined;
    const load = (signal: AbortSignal) => {
      loadSignal = signal;
      return new Promise<readonly ToolSpec[]>(() => undefined);
    };
    const first = new AbortController();
    const second = new AbortController();
    const a = cache.join('{}', first.signal, load);
    const b = cache.join('{}', second.signal, load);
    first.abort(new Error('stopped'));
    await expect(a).rejects.toMatchObject({ code: 'cancelled' });
    expect(loadSignal?.aborted).toBe(false);
    second.abort(new Error('stopped'));
    await expect(b).rejects.toMatchObject({ code: 'cancelled' });
    expect(loadSignal?.aborted).toBe(true);
  });
});
