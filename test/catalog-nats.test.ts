import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { Catalog, CatalogKeys, canonicalJson } from '@agentmesh/catalog';
import {
  CatalogGetReplySchema,
  CatalogHeartbeatReplySchema,
  CatalogRegisterReplySchema,
  CatalogSearchReplySchema,
  NatsBus,
  connectBus,
  requestJson,
  silentLogger,
  subjects,
  type Backend,
  type ToolSpec,
} from '@agentmesh/protocol';
import { loadCatalogFixture } from './fixtures/catalog/load.js';
import { until } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
const tools: ToolSpec[] = loadCatalogFixture();
const byName = (name: string) => tools.find((t) => t.name === name)!;

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

/** A prefix and a bucket of its own, so tests sharing the server do not see each other; the bucket goes after. */
function isolated() {
  const id = randomUUID().slice(0, 8);
  const ctx = { prefix: `cat${id}`, bucket: `catalog_${id}` };
  cleanup.unshift(async () => {
    const b = (await connectBus({ natsUrl, logger: silentLogger() })) as NatsBus;
    const jsm = await b.jetstreamManager();
    await jsm.streams.delete(`KV_${ctx.bucket}`).catch(() => undefined);
    await b.close();
  });
  return ctx;
}

async function bus(): Promise<Backend> {
  const b = await connectBus({ natsUrl, logger: silentLogger() });
  cleanup.push(() => b.close());
  return b;
}

async function startCatalog(ctx: { prefix: string; bucket: string }, workerTtlMs = 10_000): Promise<Catalog> {
  const catalog = new Catalog({ bus: await bus(), ...ctx, logger: silentLogger(), workerTtlMs });
  await catalog.start();
  cleanup.push(() => catalog.stop());
  return catalog;
}

function spawnRawWorker(ctx: { prefix: string }, workerId: string, ttlMs: number, names: string[]) {
  const child: ChildProcess = spawn(
    process.execPath,
    [
      new URL('./fixtures/catalog/raw-worker.mjs', import.meta.url).pathname,
      natsUrl,
      ctx.prefix,
      workerId,
      String(ttlMs),
      names.join(','),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  cleanup.push(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  const events: { event: string }[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) =>
    events.push(JSON.parse(line) as { event: string }),
  );
  return { child, events };
}

describe('catalog on a real nats-server', () => {
  it('two replicas agree on registrations, re-registrations and deregistrations', async () => {
    const ctx = isolated();
    const [a, b] = [await startCatalog(ctx), await startCatalog(ctx)];
    const client = await bus();
    const s = subjects(ctx.prefix);
    const batch1 = tools.slice(0, 40);
    const batch2 = tools.slice(40, 100);
    await requestJson(
      client,
      s.catalogRegister,
      { worker_id: 'w1', tools: batch1 },
      CatalogRegisterReplySchema,
    );
    await requestJson(
      client,
      s.catalogRegister,
      { worker_id: 'w2', tools: batch2 },
      CatalogRegisterReplySchema,
    );
    const expected = [...batch1, ...batch2].map((t) => t.name).sort();
    await until(
      'both replicas to hold 100 tools',
      () => a.toolNames().length === 100 && b.toolNames().length === 100,
    );
    expect(a.toolNames()).toEqual(expected);
    expect(b.toolNames()).toEqual(expected);
    await requestJson(client, s.catalogDeregister, { worker_id: 'w1' }, CatalogHeartbeatReplySchema);
    await until('both replicas to drop w1', () => a.toolNames().length === 60 && b.toolNames().length === 60);
    expect(a.toolNames()).toEqual(b.toolNames());
    for (let i = 0; i < 6; i++) {
      const reply = await requestJson(
        client,
        s.catalogSearch,
        { query: 'pull request', deferred_only: false },
        CatalogSearchReplySchema,
      );
      expect(reply.results.length).toBeGreaterThan(0);
    }
  });

  it('a conflicting spec is rejected by another replica that learned the first one from the bucket', async () => {
    const ctx = isolated();
    const client = await bus();
    const s = subjects(ctx.prefix);
    const first = await startCatalog(ctx);
    const sha = byName('crypto.sha256');
    await requestJson(
      client,
      s.catalogRegister,
      { worker_id: 'host-a:1', tools: [sha] },
      CatalogRegisterReplySchema,
    );
    const second = await startCatalog(ctx);
    await first.stop();
    expect(second.toolNames()).toEqual(['crypto.sha256']);
    const reply = await requestJson(
      client,
      s.catalogRegister,
      { worker_id: 'host-b:2', tools: [{ ...sha, description: 'A different contract' }] },
      CatalogRegisterReplySchema,
    );
    expect(reply.accepted).toEqual([]);
    expect(reply.rejected[0]?.error).toMatchObject({
      code: 'conflict',
      details: { serving_workers: ['host-a:1'], worker_id: 'host-b:2' },
    });
    expect(reply.rejected[0]?.error.message).toContain('"host-a:1"');
    expect(reply.rejected[0]?.error.message).toContain('"host-b:2"');
    const newVersion = await requestJson(
      client,
      s.catalogRegister,
      { worker_id: 'host-b:2', tools: [{ ...sha, version: '2', description: 'A different contract' }] },
      CatalogRegisterReplySchema,
    );
    expect(newVersion.rejected).toEqual([]);
    const got = await requestJson(client, s.catalogGet, { name: 'crypto.sha256' }, CatalogGetReplySchema);
    expect(got.tool.version).toBe('2');
  });

  it('a spec equal up to key order through another replica is one tool, and records keep the hash older catalogs compute', async () => {
    const ctx = isolated();
    const [a, b] = [await startCatalog(ctx), await startCatalog(ctx)];
    const client = await bus();
    const s = subjects(ctx.prefix);
    const spec = {
      ...byName('crypto.sha256'),
      description: 'SHA-256 of a text: ü, 😀, a tab\t and a "quote"',
    };
    /** The same value, every object's keys in the reverse order, as another worker may send it. */
    const reversed = (v: unknown): unknown =>
      Array.isArray(v)
        ? v.map(reversed)
        : typeof v === 'object' && v !== null
          ? Object.fromEntries(
              Object.entries(v)
                .reverse()
                .map(([k, x]) => [k, reversed(x)]),
            )
          : v;
    const register = (workerId: string, tool: unknown) =>
      requestJson(
        client,
        s.catalogRegister,
        { worker_id: workerId, tools: [tool] },
        CatalogRegisterReplySchema,
      );
    expect((await register('w-a', spec)).accepted).toEqual(['crypto.sha256']);
    await until(
      'both replicas to hold the tool',
      () => a.toolNames().length === 1 && b.toolNames().length === 1,
    );
    // a queue group picks the replica: whichever answers, it learned w-a's claim from the bucket or made it itself
    for (let i = 0; i < 4; i++) {
      const reply = await register(`w-b${i}`, reversed(spec));
      expect(reply.rejected).toEqual([]);
      expect(reply.accepted).toEqual(['crypto.sha256']);
    }
    const conflict = await register('w-c', {
      ...(reversed(spec) as ToolSpec),
      description: 'another contract',
    } as ToolSpec);
    expect(conflict.rejected[0]?.error).toMatchObject({ code: 'conflict' });
    const got = await requestJson(client, s.catalogGet, { name: 'crypto.sha256' }, CatalogGetReplySchema);
    expect(got.workers.sort()).toEqual(['w-a', 'w-b0', 'w-b1', 'w-b2', 'w-b3']);
    // the stored record: JSON whose hash is the sha256 of the generic canonical JSON (what every catalog computes)
    const kv = await (await bus()).kv(ctx.bucket);
    const entry = await kv.get(CatalogKeys.worker('w-b0'));
    const record = JSON.parse(Buffer.from(entry!.value).toString('utf8')) as {
      worker_id: string;
      tools: { hash: string; spec: ToolSpec }[];
    };
    expect(record.worker_id).toBe('w-b0');
    expect(record.tools[0]!.spec).toEqual(spec);
    expect(record.tools[0]!.hash).toBe(
      createHash('sha256').update(canonicalJson(spec), 'utf8').digest('hex'),
    );
  });

  it('conflicting registrations racing on two replicas: exactly one spec wins, everywhere', async () => {
    const ctx = isolated();
    const [a, b] = [await startCatalog(ctx), await startCatalog(ctx)];
    const client = await bus();
    const s = subjects(ctx.prefix);
    const base = byName('json.format');
    const replies = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        requestJson(
          client,
          s.catalogRegister,
          { worker_id: `racer-${i}`, tools: [{ ...base, description: `${base.description}, variant ${i}` }] },
          CatalogRegisterReplySchema,
        ),
      ),
    );
    const winners = replies.map((r, i) => (r.accepted.length === 1 ? i : -1)).filter((i) => i >= 0);
    expect(winners).toHaveLength(1);
    for (const r of replies.filter((r) => r.accepted.length === 0))
      expect(r.rejected[0]?.error.code).toBe('conflict');
    await until('both replicas to settle', () => a.toolNames().length === 1 && b.toolNames().length === 1);
    const got = await requestJson(client, s.catalogGet, { name: 'json.format' }, CatalogGetReplySchema);
    expect(got.workers).toEqual([`racer-${winners[0]}`]);
    expect(got.tool.description).toBe(`${base.description}, variant ${winners[0]}`);
  });

  it("reads back from the bucket only other replicas' records, not its own, in a burst of registrations", async () => {
    const ctx = isolated();
    const mine = await startCatalog(ctx);
    const client = (await bus()) as NatsBus;
    // the watch reads a record it does not hold by revision: a direct get on the stream's own subject
    const reads: string[] = [];
    const sub = client.subscribe(
      `$JS.API.DIRECT.GET.KV_${ctx.bucket}`,
      (msg) => void reads.push(msg.subject),
    );
    await client.flush();
    const register = (prefix: string, workerId: string, specs: ToolSpec[]) =>
      requestJson(
        client,
        subjects(prefix).catalogRegister,
        { worker_id: workerId, tools: specs },
        CatalogRegisterReplySchema,
      );
    await Promise.all(
      Array.from({ length: 40 }, (_, i) => register(ctx.prefix, `burst-${i}`, tools.slice(5 * i, 5 * i + 5))),
    );
    expect(mine.toolNames()).toHaveLength(200);
    // another replica on the same bucket (its own subjects, so it alone takes the next registration)
    const other = await startCatalog({ prefix: `${ctx.prefix}x`, bucket: ctx.bucket });
    expect(other.toolNames()).toHaveLength(200);
    await client.flush();
    expect(reads).toEqual([]);
    await register(`${ctx.prefix}x`, 'elsewhere', [tools[300]!]);
    await until("the first replica to apply the other one's record", () => mine.toolNames().length === 201);
    await until('the read to be seen', () => reads.length === 1);
    await client.flush();
    expect(reads).toHaveLength(1);
    sub.unsubscribe();
  });

  it('a catalog restarted mid-run serves the same tools at once, and heartbeats keep working', async () => {
    const ctx = isolated();
    const names = tools.slice(100, 130).map((t) => t.name);
    const worker = spawnRawWorker(ctx, 'raw-restart', 600, names);
    const first = await startCatalog(ctx, 600);
    await until('the worker to register', () => first.toolNames().length === 30);
    await first.stop();
    await new Promise((r) => setTimeout(r, 300));
    const restarted = await startCatalog(ctx, 600);
    expect(restarted.toolNames()).toEqual([...names].sort());
    await new Promise((r) => setTimeout(r, 1500));
    expect(restarted.toolNames()).toHaveLength(30);
    expect(worker.events.filter((e) => e.event === 'registered')).toHaveLength(1);
  });

  it('a worker killed with -9 disappears from every replica within the expiry window', async () => {
    const ctx = isolated();
    const ttlMs = 800;
    const [a, b] = [await startCatalog(ctx), await startCatalog(ctx)];
    const names = ['git.status', 'git.log', 'git.diff'];
    const survivor = spawnRawWorker(ctx, 'raw-survivor', ttlMs, ['fs.read_file']);
    const victim = spawnRawWorker(ctx, 'raw-victim', ttlMs, names);
    await until(
      'both workers on both replicas',
      () => a.toolNames().length === 4 && b.toolNames().length === 4,
    );
    victim.child.kill('SIGKILL');
    const killedAt = Date.now();
    await until(
      'the victim to expire on both replicas',
      () => a.toolNames().length === 1 && b.toolNames().length === 1,
      5000,
    );
    const elapsed = Date.now() - killedAt;
    // the window: the ttl after the last heartbeat, plus one sweep period (ttl / 5) and delivery
    expect(elapsed).toBeLessThanOrEqual(ttlMs + ttlMs / 5 + 500);
    expect(a.toolNames()).toEqual(['fs.read_file']);
    await new Promise((r) => setTimeout(r, ttlMs * 2));
    expect(b.toolNames()).toEqual(['fs.read_file']);
    expect(survivor.child.exitCode).toBeNull();
  });

  it('a forgotten worker hears known:false on its next heartbeat and registers again', async () => {
    const ctx = isolated();
    const catalog = await startCatalog(ctx);
    const worker = spawnRawWorker(ctx, 'raw-forgotten', 600, ['weather.current']);
    await until('registration', () => catalog.toolNames().length === 1);
    const client = await bus();
    await requestJson(
      client,
      subjects(ctx.prefix).catalogDeregister,
      { worker_id: 'raw-forgotten' },
      CatalogHeartbeatReplySchema,
    );
    await until('re-registration', () => worker.events.filter((e) => e.event === 'registered').length === 2);
    expect(worker.events.map((e) => e.event)).toEqual(['registered', 'forgotten', 'registered']);
    expect(catalog.toolNames()).toEqual(['weather.current']);
  });

  it('answers NATS service discovery as agentmesh-catalog', async () => {
    const ctx = isolated();
    await startCatalog(ctx);
    const client = (await bus()) as NatsBus;
    const msg = await client.request('$SRV.PING.agentmesh-catalog', '');
    expect(JSON.parse(msg.text())).toMatchObject({ name: 'agentmesh-catalog' });
  });
});
