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
