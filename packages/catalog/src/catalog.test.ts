import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  AgentMeshError,
  CATALOG_BUCKET,
  CatalogGetReplySchema,
  CatalogListReplySchema,
  CatalogRegisterReplySchema,
  CatalogSearchReplySchema,
  CatalogHeartbeatReplySchema,
  MemoryBus,
  ToolSpecSchema,
  requestJson,
  silentLogger,
  subjects,
  type ToolSpec,
  type ToolSpecInput,
} from '@agentmesh/protocol';
import { Catalog, type CatalogOptions } from './index.js';

const s = subjects();

async function until(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const t0 = Date.now();
  while (!check()) {
    if (Date.now() - t0 > timeoutMs) throw new Error('timed out waiting for the condition');
    await new Promise((r) => setTimeout(r, 10));
  }
}

function spec(name: string, description: string, extra: Partial<ToolSpecInput> = {}): ToolSpec {
  return ToolSpecSchema.parse({
    name,
    description,
    namespace: name.split('.')[0],
    input_schema: { type: 'object', properties: { text: { type: 'string', description: 'input text' } } },
    safety: {},
    timeout_ms: 1000,
    retry: { max_attempts: 1, timeout_ms: 1000, retry_on: [], backoff_ms: 0, max_backoff_ms: 0, jitter: 0 },
    idempotent: true,
    loading: 'deferred',
    ...extra,
  });
}

const TOOLS = [
  spec('crypto.sha256', 'Compute the SHA-256 hash of a text'),
  spec('crypto.md5', 'Compute the MD5 checksum of a text'),
  spec('math.calc', 'Add, subtract, multiply or divide two numbers', { loading: 'always' }),
  spec('fs.read_file', 'Open a file and return its contents'),
  spec('fs.write_file', 'Write text to a file'),
];

describe('Catalog on the in-process bus', () => {
  let bus: MemoryBus;
  let catalog: Catalog;
  const start = async (options: Partial<CatalogOptions> = {}) => {
    catalog = new Catalog({ bus, logger: silentLogger(), ...options });
    await catalog.start();
  };
  const register = (worker_id: string, tools: ToolSpec[], ttl_ms?: number) =>
    requestJson(
      bus,
      s.catalogRegister,
      { worker_id, tools, ...(ttl_ms ? { ttl_ms } : {}) },
      CatalogRegisterReplySchema,
    );
  const search = (body: Record<string, unknown>) =>
    requestJson(bus, s.catalogSearch, body, CatalogSearchReplySchema);
  const list = (body: Record<string, unknown> = {}) =>
    requestJson(bus, s.catalogList, body, CatalogListReplySchema);

  beforeEach(() => {
    bus = new MemoryBus();
  });
  afterEach(async () => {
    await catalog?.stop();
    await bus.close();
  });

  it('register requests: a spec without its defaults gets them, a name only the name rules refuse is named', async () => {
    await start();
    const { version: _v, cpu_bound: _c, tags: _t, ...bare } = spec('text.upper', 'Upper-case a text');
    const reply = await register('w1', [bare as ToolSpec]);
    expect(reply.accepted).toEqual(['text.upper']);
    const got = await requestJson(bus, s.catalogGet, { name: 'text.upper' }, CatalogGetReplySchema);
    expect(got.tool).toMatchObject({ version: '1', cpu_bound: false, tags: [] });
    // matches the JSON Schema check (lowercase segments) but has "__", which only the tool-name rules refuse
    await expect(
      register('w2', [{ ...spec('text.lower', 'Lower-case a text'), name: 'text__lower' }]),
    ).rejects.toMatchObject({
      code: 'invalid_message',
      message: expect.stringMatching(/tools\.0\.name/),
    });
    await expect(register('w2', [{ ...spec('text.lower', 'x'), timeout_ms: 2 ** 60 }])).rejects.toMatchObject(
      {
        message: expect.stringMatching(/tools\.0\.timeout_ms/),
      },
    );
  });

  it('registers, lists, gets and searches tools', async () => {
    await start();
    const reply = await register('w1', TOOLS);
    expect(reply.accepted.sort()).toEqual(TOOLS.map((t) => t.name).sort());
    expect(reply.rejected).toEqual([]);
    expect(reply.ttl_ms).toBe(10_000);
    const listed = await list();
    expect(listed.tools.map((t) => t.name)).toEqual([
      'crypto.md5',
      'crypto.sha256',
      'fs.read_file',
      'fs.write_file',
      'math.calc',
    ]);
    expect(listed.specs).toBeUndefined();
    const got = await requestJson(bus, s.catalogGet, { name: 'crypto.sha256' }, CatalogGetReplySchema);
    expect(got.tool.description).toBe('Compute the SHA-256 hash of a text');
    expect(got.workers).toEqual(['w1']);
    const found = await search({ query: 'hash text sha256' });
    expect(found.results[0]?.name).toBe('crypto.sha256');
    expect(found.strategy).toBe('bm25');
    expect(found.limit).toBe(10);
  });

  it('list filters by namespace, loading and text, and adds specs with full', async () => {
    await start();
    await register('w1', TOOLS);
    expect((await list({ namespace: 'fs' })).tools.map((t) => t.name)).toEqual([
      'fs.read_file',
      'fs.write_file',
    ]);
    expect((await list({ loading: 'always' })).tools.map((t) => t.name)).toEqual(['math.calc']);
    expect((await list({ text: 'CHECKSUM' })).tools.map((t) => t.name)).toEqual(['crypto.md5']);
    const full = await list({ namespace: 'crypto', full: true });
    expect(full.specs?.map((t) => t.name)).toEqual(['crypto.md5', 'crypto.sha256']);
  });

  it('pages a list with offset and limit, and never replies more than one message holds', async () => {
    await start();
    await register('w1', TOOLS);
    const page1 = await list({ limit: 2 });
    expect(page1.tools.map((t) => t.name)).toEqual(['crypto.md5', 'crypto.sha256']);
    expect(page1).toMatchObject({ total: 5, next_offset: 2 });
    const page3 = await list({ offset: 4, limit: 2 });
    expect(page3.tools.map((t) => t.name)).toEqual(['math.calc']);
    expect(page3.next_offset).toBeUndefined();
    await catalog.stop();
    await bus.close();
    bus = new MemoryBus({ maxPayload: 4096 });
    await start();
    const many = Array.from({ length: 40 }, (_, i) =>
      spec(`bulk.tool_${String(i).padStart(2, '0')}`, 'x'.repeat(60)),
    );
    for (let i = 0; i < many.length; i += 2) await register(`w${i}`, many.slice(i, i + 2));
    const seen: string[] = [];
    let offset: number | undefined = 0;
    while (offset !== undefined) {
      const page = await list({ offset, full: true });
      expect(page.tools.length).toBeGreaterThan(0);
      expect(page.specs).toHaveLength(page.tools.length);
      seen.push(...page.tools.map((t) => t.name));
      offset = page.next_offset;
    }
    expect(seen).toEqual(many.map((t) => t.name));
  });

  it('identical specs from two workers are one tool with two providers; a worker leaving keeps the tool', async () => {
    await start();
    await register('w1', TOOLS);
    await register('w2', TOOLS);
    const got = await requestJson(bus, s.catalogGet, { name: 'fs.read_file' }, CatalogGetReplySchema);
    expect(got.workers).toEqual(['w1', 'w2']);
    expect((await list({ namespace: 'fs' })).tools[0]?.workers).toBe(2);
    await requestJson(bus, s.catalogDeregister, { worker_id: 'w1' }, CatalogHeartbeatReplySchema);
    expect(
      (await requestJson(bus, s.catalogGet, { name: 'fs.read_file' }, CatalogGetReplySchema)).workers,
    ).toEqual(['w2']);
    await requestJson(bus, s.catalogDeregister, { worker_id: 'w2' }, CatalogHeartbeatReplySchema);
    await expect(
      requestJson(bus, s.catalogGet, { name: 'fs.read_file' }, CatalogGetReplySchema),
    ).rejects.toMatchObject({
      code: 'not_found',
    });
  });

  it('rejects a different spec under a served name and version, naming both workers', async () => {
    await start();
    await register('worker-a', [TOOLS[0]!]);
    const changed = { ...TOOLS[0]!, description: 'Something else entirely' };
    const reply = await register('worker-b', [changed, TOOLS[1]!]);
    expect(reply.accepted).toEqual(['crypto.md5']);
    expect(reply.rejected).toHaveLength(1);
    expect(reply.rejected[0]?.name).toBe('crypto.sha256');
    expect(reply.rejected[0]?.error.code).toBe('conflict');
    expect(reply.rejected[0]?.error.message).toContain('"worker-a"');
    expect(reply.rejected[0]?.error.message).toContain('"worker-b"');
    const got = await requestJson(bus, s.catalogGet, { name: 'crypto.sha256' }, CatalogGetReplySchema);
    expect(got.tool.description).toBe(TOOLS[0]!.description);
    expect(got.workers).toEqual(['worker-a']);
  });

  it('rejects a name twice in one registration', async () => {
    await start();
    const reply = await register('w1', [TOOLS[0]!, TOOLS[0]!]);
    expect(reply.accepted).toEqual(['crypto.sha256']);
    expect(reply.rejected[0]?.error.message).toMatch(/appears twice/);
    // two versions of one name are not a repeat; the second copy of the first version is
    const v2 = { ...TOOLS[0]!, version: '2' };
    const versions = await register('w2', [TOOLS[0]!, v2, { ...TOOLS[0]!, description: 'other' }]);
    expect(versions.accepted).toEqual(['crypto.sha256', 'crypto.sha256']);
    expect(versions.rejected).toHaveLength(1);
    expect(versions.rejected[0]?.error.message).toMatch(/version "1" appears twice/);
  });

  it('a worker may change its own spec when nobody else serves it', async () => {
    await start();
    await register('w1', [TOOLS[0]!]);
    const reply = await register('w1', [{ ...TOOLS[0]!, description: 'Hash a text with SHA-256' }]);
    expect(reply.rejected).toEqual([]);
    const got = await requestJson(bus, s.catalogGet, { name: 'crypto.sha256' }, CatalogGetReplySchema);
    expect(got.tool.description).toBe('Hash a text with SHA-256');
  });

  it('rolls out a new version while the old one drains', async () => {
    await start();
    await register('old-1', [TOOLS[0]!]);
    const v2 = { ...TOOLS[0]!, version: '2', description: 'Compute the SHA-256 digest, v2' };
    expect((await register('new-1', [v2])).rejected).toEqual([]);
    let got = await requestJson(bus, s.catalogGet, { name: 'crypto.sha256' }, CatalogGetReplySchema);
    expect(got.tool.version).toBe('2');
    expect(got.workers).toEqual(['new-1']);
    await requestJson(bus, s.catalogDeregister, { worker_id: 'new-1' }, CatalogHeartbeatReplySchema);
    got = await requestJson(bus, s.catalogGet, { name: 'crypto.sha256' }, CatalogGetReplySchema);
    expect(got.tool.version).toBe('1');
    expect((await search({ query: 'sha256' })).results[0]?.description).toBe(TOOLS[0]!.description);
  });

  it('expires a worker that misses its heartbeats; its heartbeat then answers known:false', async () => {
    await start();
    await register('w1', TOOLS, 300);
    const beat = () => requestJson(bus, s.catalogHeartbeat, { worker_id: 'w1' }, CatalogHeartbeatReplySchema);
    for (let i = 0; i < 4; i++) {
      expect(await beat()).toEqual({ known: true });
      await new Promise((r) => setTimeout(r, 150));
    }
    expect((await list()).tools).toHaveLength(5);
    await new Promise((r) => setTimeout(r, 800));
    expect((await list()).tools).toEqual([]);
    expect(await beat()).toEqual({ known: false });
  });

  it('batches heartbeats: none is a KV write, and a replica that hears none keeps the worker alive on the pulses', async () => {
    await start();
    const other = new Catalog({ bus, prefix: 'other', logger: silentLogger() });
    await other.start();
    try {
      await register('w1', TOOLS, 300);
      await until(() => other.toolNames().length === 5);
      const keys: string[] = [];
      const watcher = await (
        await bus.kv(CATALOG_BUCKET)
      ).watch((e) => keys.push(e.key), { updatesOnly: true });
      const beat = () =>
        requestJson(bus, s.catalogHeartbeat, { worker_id: 'w1' }, CatalogHeartbeatReplySchema);
      let beats = 0;
      const t0 = Date.now();
      while (Date.now() - t0 < 1200) {
        expect(await beat()).toEqual({ known: true });
        beats++;
        // the in-process bus answers in microtasks: let the timers (sweeps, flushes) run between heartbeats
        await new Promise((r) => setImmediate(r));
      }
      watcher.stop();
      // four ttls on heartbeats `other` never heard itself: only the pulses kept w1 alive there
      expect(other.toolNames()).toHaveLength(5);
      const pulses = keys.filter((k) => k.startsWith('pulses.'));
      expect(keys.filter((k) => k.startsWith('beats.'))).toEqual([]);
      expect(pulses.length).toBeGreaterThan(0);
      expect(pulses.length).toBeLessThan(beats / 5);
      await until(() => other.toolNames().length === 0);
    } finally {
      await other.stop();
    }
  });

  it('a heartbeat key an earlier catalog wrote still keeps its worker alive, and is deleted with the worker', async () => {
    await start();
    await register('w1', TOOLS, 300);
    const kv = await bus.kv(CATALOG_BUCKET);
    const beatKey = `beats.${Buffer.from('w1').toString('base64url')}`;
    const t0 = Date.now();
    while (Date.now() - t0 < 1000) {
      await kv.put(beatKey, new TextEncoder().encode('{}'));
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(catalog.toolNames()).toHaveLength(5);
    await requestJson(bus, s.catalogDeregister, { worker_id: 'w1' }, CatalogHeartbeatReplySchema);
    expect(await kv.get(beatKey)).toBeNull();
  });

  it('answers unchanged to a list that sends the current version back, and a full list after any change', async () => {
    await start();
    await register('w1', TOOLS.slice(0, 2));
    const first = await list({ full: true });
    expect(first.version).toEqual(expect.any(String));
    expect(first.unchanged).toBeUndefined();
    expect(await list({ full: true, cached: first.version })).toEqual({
      tools: [],
      unchanged: true,
      version: first.version,
    });
    const versions = new Set([first.version]);
    const fullAfter = async (change: () => Promise<unknown>) => {
      await change();
      const reply = await list({ full: true, cached: [...versions].at(-1) });
      expect(reply.unchanged).toBeUndefined();
      expect(versions.has(reply.version!)).toBe(false);
      versions.add(reply.version!);
      return reply.specs!.map((t) => t.name);
    };
    // a new tool, a second worker of a served tool, a worker leaving, a changed spec: each is a new version
    expect(await fullAfter(() => register('w2', [TOOLS[2]!]))).toEqual([
      'crypto.md5',
      'crypto.sha256',
      'math.calc',
    ]);
    expect(await fullAfter(() => register('w3', [TOOLS[2]!]))).toHaveLength(3);
    expect(
      await fullAfter(() =>
        requestJson(bus, s.catalogDeregister, { worker_id: 'w2' }, CatalogHeartbeatReplySchema),
      ),
    ).toHaveLength(3);
    const changed = spec('crypto.md5', 'Compute the MD5 checksum of a text, in hex');
    await fullAfter(() => register('w1', [TOOLS[0]!, changed]));
    const now = await list({ full: true, cached: [...versions].at(-1) });
    expect(now.unchanged).toBe(true);
    // another catalog (a replica, or this one restarted) never takes this one's version for its own
    await catalog.stop();
    await start();
    const restarted = await list({ full: true, cached: [...versions].at(-1) });
    expect(restarted.unchanged).toBeUndefined();
    expect(restarted.specs?.find((t) => t.name === 'crypto.md5')?.description).toBe(changed.description);
  });

  it('applies exposure: spec default, then configured globs, then the request (always wins)', async () => {
    await start({ exposure: { always: ['crypto.*'], deferred: ['math.calc'] } });
    await register('w1', TOOLS);
    const loading = async (body: Record<string, unknown> = {}) =>
      Object.fromEntries((await list(body)).tools.map((t) => [t.name, t.loading]));
    expect(await loading()).toEqual({
      'crypto.md5': 'always',
      'crypto.sha256': 'always',
      'fs.read_file': 'deferred',
      'fs.write_file': 'deferred',
      'math.calc': 'deferred',
    });
    expect(await loading({ deferred: ['crypto.md5', 'fs.*'], always: ['fs.read_file'] })).toMatchObject({
      'crypto.md5': 'deferred',
      'crypto.sha256': 'always',
      'fs.read_file': 'always',
      'fs.write_file': 'deferred',
    });
    const got = await requestJson(bus, s.catalogGet, { name: 'math.calc' }, CatalogGetReplySchema);
    expect(got.tool.loading).toBe('deferred');
    expect((await search({ query: 'sha256 hash' })).results.map((r) => r.name)).toEqual([]);
    expect((await search({ query: 'sha256 hash', deferred_only: false })).results[0]?.name).toBe(
      'crypto.sha256',
    );
    expect((await search({ query: 'sha256 hash', deferred: ['crypto'] })).results[0]?.name).toBe(
      'crypto.sha256',
    );
  });

  it('applies the allow-list before anything is returned', async () => {
    await start();
    await register('w1', TOOLS);
    expect((await list({ allow: ['fs'] })).tools.map((t) => t.name)).toEqual([
      'fs.read_file',
      'fs.write_file',
    ]);
    expect((await list({ allow: [] })).tools).toEqual([]);
    expect(
      (await search({ query: 'hash text sha256 file', allow: ['fs.read_file'] })).results.map((r) => r.name),
    ).toEqual(['fs.read_file']);
    await expect(
      requestJson(bus, s.catalogGet, { name: 'crypto.sha256', allow: ['fs'] }, CatalogGetReplySchema),
    ).rejects.toMatchObject({ code: 'not_found', message: expect.stringContaining('allow-list') });
  });

  it('clamps the limit, applies configured defaults, and rejects an empty query', async () => {
    await start({ search: { strategy: 'hybrid', limit: 2 } });
    await register('w1', TOOLS);
    const dflt = await search({ query: 'text' });
    expect(dflt.strategy).toBe('hybrid');
    expect(dflt.limit).toBe(2);
    expect(dflt.results.length).toBeLessThanOrEqual(2);
    expect((await search({ query: 'text', limit: 0 })).limit).toBe(1);
    expect((await search({ query: 'text', limit: 10_000 })).limit).toBe(50);
    expect((await search({ query: 'text', limit: -5 })).limit).toBe(1);
    const error = await search({ query: '   ' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AgentMeshError);
    expect(error).toMatchObject({ code: 'invalid_request', message: 'query must not be empty' });
    expect((await search({ query: 'nothing-matches-this' })).results).toEqual([]);
  });

  it('a restarted catalog on the same bucket serves the same tools at once', async () => {
    await start();
    await register('w1', TOOLS);
    await catalog.stop();
    catalog = new Catalog({ bus, logger: silentLogger() });
    await catalog.start();
    expect(catalog.toolNames()).toHaveLength(5);
    expect((await search({ query: 'md5 checksum' })).results[0]?.name).toBe('crypto.md5');
  });

  it('serves each tool as registered, from its own write and from the bucket after a restart', async () => {
    await start();
    const schema = { type: 'object', properties: { z: { type: 'string' }, a: { type: 'number' } } };
    const tools = [
      ...TOOLS,
      spec('text.unicode', 'Ünïcode "quoted" \n text', { input_schema: schema, tags: ['b', 'a'] }),
    ];
    await register('w1', tools);
    const get = (name: string) => requestJson(bus, s.catalogGet, { name }, CatalogGetReplySchema);
    const served = async () => {
      for (const tool of tools) expect((await get(tool.name)).tool).toEqual(tool);
      const full = await list({ full: true });
      expect(full.specs).toEqual([...tools].sort((a, b) => (a.name < b.name ? -1 : 1)));
    };
    await served();
    await catalog.stop();
    catalog = new Catalog({ bus, logger: silentLogger() });
    await catalog.start();
    await served();
  });
});
