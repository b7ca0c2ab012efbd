// The catalog: tool search p50/p99 at 1,000 and 10,000 tools in-process (next to a plain async call) and over NATS
// (next to a raw NATS request/reply of the same request), registering 10,000 tools over NATS (next to writing the
// same records straight to KV and to two floors, in alternated blocks), and the memory 10,000 tools take (next to the
// specs as plain objects).
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { performance } from 'node:perf_hooks';
import { connect } from '@nats-io/transport-node';
import { Kvm } from '@nats-io/kv';
import { Catalog, checkRegister, createToolIndex, specHash } from '@agentmesh/catalog';
import {
  CatalogRegisterReplySchema,
  parseJson,
  MemoryBus,
  NatsBus,
  encodeJson,
  requestJson,
  silentLogger,
  subjects,
} from '@agentmesh/protocol';
import { alternated, figure, latencyFigures, measure, median, pairedRatio } from './lib.mjs';

export const title = 'Catalog: tool search, registration, memory';

const base = JSON.parse(
  readFileSync(new URL('../test/fixtures/catalog/tools.json', import.meta.url), 'utf8'),
);
const queries = JSON.parse(
  readFileSync(new URL('../test/fixtures/catalog/queries.json', import.meta.url), 'utf8'),
).natural.map((q) => q.query);
const EDITIONS = [
  'acme',
  'globex',
  'initech',
  'umbrella',
  'hooli',
  'stark',
  'wayne',
  'wonka',
  'tyrell',
  'cyberdyne',
];

/** `n` distinct, realistic tools: the fixture set, then copies in numbered namespaces (`git3.log`) with varied text. */
export function syntheticTools(n) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const t = base[i % base.length];
    const copy = Math.floor(i / base.length);
    if (copy === 0) {
      out.push(t);
      continue;
    }
    const ns = `${t.namespace}${copy}`;
    out.push({
      ...t,
      name: `${ns}${t.name.slice(t.namespace.length)}`,
      namespace: ns,
      description: `${t.description} (${EDITIONS[copy % EDITIONS.length]} ${Math.floor(copy / EDITIONS.length) || ''} edition)`,
    });
  }
  return out;
}

function gcFunction() {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc');
}

async function heapDelta(gc, build) {
  gc();
  await new Promise((r) => setTimeout(r, 10));
  gc();
  const before = process.memoryUsage().heapUsed;
  const kept = await build();
  gc();
  await new Promise((r) => setTimeout(r, 10));
  gc();
  const after = process.memoryUsage().heapUsed;
  return { bytes: Math.max(0, after - before), kept };
}

export async function registerAll(
  bus,
  prefix,
  tools,
  { perWorker = 100, concurrency = 8, workerPrefix = 'bench-w' } = {},
) {
  const s = subjects(prefix);
  const batches = [];
  for (let i = 0; i < tools.length; i += perWorker) batches.push(tools.slice(i, i + perWorker));
  let next = 0;
  const lane = async () => {
    while (next < batches.length) {
      const i = next++;
      const reply = await requestJson(
        bus,
        s.catalogRegister,
        { worker_id: `${workerPrefix}${i}`, tools: batches[i] },
        CatalogRegisterReplySchema,
        {
          timeoutMs: 30_000,
        },
      );
      if (reply.rejected.length > 0) throw new Error(`rejected: ${JSON.stringify(reply.rejected[0])}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
}

/** Registers 10,000 tools (renamed, so they are not the measured ones) through a catalog of its own, then removes it. */
async function warmRegistration(natsUrl) {
  const id = randomUUID().slice(0, 8);
  const bucket = `bench_catalog_warm_${id}`;
  const bus = await NatsBus.connect(natsUrl, { logger: silentLogger() });
  const catalog = new Catalog({ bus, prefix: `benchwarm${id}`, bucket, logger: silentLogger() });
  try {
    await catalog.start();
    const tools = syntheticTools(10000).map((t) => ({
      ...t,
      name: `warm${t.name}`,
      namespace: `warm${t.namespace}`,
    }));
    await registerAll(bus, `benchwarm${id}`, tools);
  } finally {
    await catalog.stop();
    const jsm = await bus.jetstreamManager();
    await jsm.streams.delete(`KV_${bucket}`).catch(() => undefined);
    await bus.close();
  }
}

/**
 * What registering costs with no catalog work at all: the same client sends the same 100 requests, and a bare
 * responder writes each request's bytes to a KV bucket as they arrived (no parsing, validation or hashing) and
 * replies. The gap between this and the catalog's figure is the catalog's own work. `check`, given, runs on each
 * request's bytes before the write: the work no catalog can skip (see {@link checkedFloor}).
 */
async function registrationFloor(natsUrl, tools, check = () => undefined) {
  const id = randomUUID().slice(0, 8);
  const prefix = `benchfloor${id}`;
  const bucket = `bench_floor_${id}`;
  const responder = await connect({ servers: natsUrl, noAsyncTraces: true });
  const client = await NatsBus.connect(natsUrl, { logger: silentLogger() });
  const kv = await new Kvm(responder).create(bucket, { history: 1 });
  const reply = encodeJson({ accepted: [], rejected: [], ttl_ms: 10_000 });
  let n = 0;
  const sub = responder.subscribe(subjects(prefix).catalogRegister, {
    callback: (_e, m) => {
      check(m.data);
      void kv.put(`workers.w${n++}`, m.data).then(() => m.respond(reply));
    },
  });
  try {
    await responder.flush();
    const warm = tools.slice(0, 1000).map((t) => ({ ...t, name: `warm${t.name}` }));
    await registerAll(client, prefix, warm);
    return await timed(() => registerAll(client, prefix, tools));
  } finally {
    sub.unsubscribe();
    const jsm = await client.jetstreamManager();
    await jsm.streams.delete(`KV_${bucket}`).catch(() => undefined);
    await Promise.all([responder.close(), client.close()]);
  }
}

/** The wall time of `run` and the CPU time this process (every thread) spent meanwhile, in ms. */
async function timed(run) {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await run();
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { ms, cpuMs: (cpu.user + cpu.system) / 1000 };
}

/** The same 100 records of 100 specs written straight to a KV bucket, 8 in flight (records already encoded). */
async function rawPutsOnce(kv, records) {
  let next = 0;
  return timed(() =>
    Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < records.length) {
          const i = next++;
          await kv.put(`workers.w${i}`, records[i]);
        }
      }),
    ),
  );
}

/** One timed registration of `tools` through a fresh catalog and bucket, warmed on 1,000 other tools as the floors are. */
async function registerOnce(catalogBus, client, tools) {
  const id = randomUUID().slice(0, 8);
  const prefix = `benchreg${id}`;
  const bucket = `bench_reg_${id}`;
  const catalog = new Catalog({ bus: catalogBus, prefix, bucket, logger: silentLogger() });
  try {
    await catalog.start();
    const warm = tools
      .slice(0, 1000)
      .map((t) => ({ ...t, name: `warm${t.name}`, namespace: `warm${t.namespace}` }));
    await registerAll(client, prefix, warm, { workerPrefix: 'warm-w' });
    const result = await timed(() => registerAll(client, prefix, tools));
    if (catalog.toolNames().length !== tools.length + warm.length)
      throw new Error(`catalog holds ${catalog.toolNames().length} tools`);
    return result;
  } finally {
    await catalog.stop();
    const jsm = await catalogBus.jetstreamManager();
    await jsm.streams.delete(`KV_${bucket}`).catch(() => undefined);
  }
}

/**
 * Registration against its floors, alternated in blocks (each block runs the raw puts, the catalog, the bare floor
 * and the floor + checks once, each block starting with the next one, after a full garbage collection): each figure
 * is the median of its blocks and each ratio the median of the ratios within a block.
 */
async function registrationFigures({ natsUrl, catalogBus, client, kv, tools, gc, blocks }) {
  const records = [];
  for (let i = 0; i < tools.length; i += 100)
    records.push(
      encodeJson({
        worker_id: `raw-w${i}`,
        tools: tools.slice(i, i + 100).map((spec) => ({ hash: 'x'.repeat(64), spec })),
      }),
    );
  // every path warmed first, as every other figure here is: 10 puts, and 10,000 other tools through a throwaway catalog
  for (let i = 0; i < 10; i++) await kv.put(`warm.w${i}`, records[i]);
  await warmRegistration(natsUrl);
  const collected = (run) => async () => {
    gc();
    return run();
  };
  const [puts, registered, floor, checked] = await alternated(
    [
      collected(() => rawPutsOnce(kv, records)),
      collected(() => registerOnce(catalogBus, client, tools)),
      collected(() => registrationFloor(natsUrl, tools)),
      collected(() => registrationFloor(natsUrl, tools, checkedFloor)),
    ],
    blocks,
  );
  const wall = (rs) => rs.map((r) => r.ms);
  const cpu = (rs) => rs.map((r) => r.cpuMs);
  const ms = (name, values, baseline, baselineValues) =>
    figure(name, median(values), 'ms', baseline, baseline && pairedRatio(values, baselineValues, (v) => v));
  const rawPuts = ms('100 raw KV puts of 100-spec records, 8 in flight', wall(puts));
  const register = ms(
    'register 10,000 tools over NATS (100 workers x 100)',
    wall(registered),
    rawPuts,
    wall(puts),
  );
  const bare = ms(
    'register floor: the same 100 requests put to KV unparsed by a bare responder',
    wall(floor),
    rawPuts,
    wall(puts),
  );
  const withChecks = ms(
    'register floor + checks: the bare responder parses, validates and hashes each request before the put',
    wall(checked),
    bare,
    wall(floor),
  );
  // the same blocks in CPU time of this process (client and responder share it), which load disturbs far less
  const bareCpu = ms('register floor, CPU of the process', cpu(floor));
  const checkedCpu = ms('register floor + checks, CPU of the process', cpu(checked), bareCpu, cpu(floor));
  return [
    rawPuts,
    register,
    bare,
    withChecks,
    ms('register 10,000 tools vs register floor', wall(registered), bare, wall(floor)),
    ms('register 10,000 tools vs its floor + checks', wall(registered), withChecks, wall(checked)),
    bareCpu,
    checkedCpu,
    ms('register 10,000 tools, CPU of the process', cpu(registered), bareCpu, cpu(floor)),
    ms('register 10,000 tools vs its floor + checks, CPU', cpu(registered), checkedCpu, cpu(checked)),
  ];
}

/**
 * The part of a registration no catalog can skip: parse the request, check it with the catalog's own compiled
 * register validator (tool names included) and fingerprint each spec with the catalog's primitive (sha256 of its
 * canonical JSON, written as bytes; conflict detection compares it across workers and replicas, and every record
 * stores it).
 */
export function checkedFloor(data) {
  const request = checkRegister(parseJson(data, 'register request'), 'register request');
  for (const spec of request.tools) specHash(spec);
}

export async function run({ natsUrl, quick }) {
  const figures = [];
  const count = quick ? 2000 : 10000;
  const plain = async (x) => x;
  const plainR = await measure(() => plain(queries[0]), { count });

  // in-process search
  for (const size of [1000, 10000]) {
    const index = createToolIndex();
    for (const t of syntheticTools(size)) index.add(t);
    for (const strategy of ['bm25', 'hybrid']) {
      const r = await measure((i) => index.search(queries[i % queries.length], { strategy, limit: 10 }), {
        count,
      });
      figures.push(
        ...latencyFigures(
          `search ${strategy} in-process, ${size} tools`,
          r,
          'plain async call',
          plainR,
        ).slice(0, 2),
      );
    }
    const rx = await measure(
      (i) => index.search(['^git\\.', 'read.*file', 'sha256', 'pull.?request'][i % 4], { strategy: 'regex' }),
      {
        count: Math.floor(count / 10),
      },
    );
    figures.push(
      ...latencyFigures(`search regex in-process, ${size} tools`, rx, 'plain async call', plainR).slice(0, 2),
    );
  }

  // registration over NATS, alternated with its floors; then search over NATS
  const gc = gcFunction();
  const id = randomUUID().slice(0, 8);
  const prefix = `benchcat${id}`;
  const bucket = `bench_catalog_${id}`;
  const rawBucket = `bench_rawkv_${id}`;
  const catalogBus = await NatsBus.connect(natsUrl, { logger: silentLogger() });
  const client = await NatsBus.connect(natsUrl, { logger: silentLogger() });
  const raw = await connect({ servers: natsUrl, noAsyncTraces: true });
  const rawResponder = await connect({ servers: natsUrl, noAsyncTraces: true });
  const catalog = new Catalog({ bus: catalogBus, prefix, bucket, logger: silentLogger() });
  try {
    await catalog.start();
    const tools = syntheticTools(10000);
    const kv = await new Kvm(raw).create(rawBucket, { history: 1 });
    figures.push(
      ...(await registrationFigures({ natsUrl, catalogBus, client, kv, tools, gc, blocks: quick ? 3 : 5 })),
    );

    await registerAll(client, prefix, tools);
    if (catalog.toolNames().length !== 10000)
      throw new Error(`catalog holds ${catalog.toolNames().length} tools`);
    const request = encodeJson({ query: queries[0], limit: 10, deferred_only: false });
    rawResponder.subscribe('bench.catalog.raw', { callback: (_e, m) => m.respond(m.data) });
    await rawResponder.flush();
    const n = quick ? 1000 : 4000;
    const rawR = await measure(() => raw.request('bench.catalog.raw', request, { timeout: 5000 }), {
      count: n,
    });
    const s = subjects(prefix);
    const bodies = queries.map((q) => encodeJson({ query: q, limit: 10, deferred_only: false }));
    const natsR = await measure((i) => client.request(s.catalogSearch, bodies[i % bodies.length]), {
      count: n,
    });
    figures.push(
      ...latencyFigures('search bm25 over NATS, 10000 tools', natsR, 'raw NATS request/reply', rawR).slice(
        0,
        2,
      ),
    );
    figures.push(figure('search over NATS minus raw round trip, p50', natsR.p50_us - rawR.p50_us, 'us'));
  } finally {
    await catalog.stop();
    const jsm = await catalogBus.jetstreamManager();
    await jsm.streams.delete(`KV_${bucket}`).catch(() => undefined);
    await jsm.streams.delete(`KV_${rawBucket}`).catch(() => undefined);
    await Promise.all([catalogBus.close(), client.close(), raw.close(), rawResponder.close()]);
  }

  // memory for 10,000 tools
  const specs = await heapDelta(gc, () => JSON.parse(JSON.stringify(syntheticTools(10000))));
  const specsFigure = figure('heap: 10,000 specs as plain objects', specs.bytes / 1048576, 'MiB');
  const indexMem = await heapDelta(gc, () => {
    const index = createToolIndex();
    for (const t of specs.kept) index.add(t);
    return index;
  });
  const bus = new MemoryBus();
  const embedded = await heapDelta(gc, async () => {
    const c = new Catalog({ bus, logger: silentLogger() });
    await c.start();
    await registerAll(bus, 'agentmesh', specs.kept);
    return c;
  });
  await embedded.kept.stop();
  figures.push(
    specsFigure,
    figure('heap: search index of 10,000 tools', indexMem.bytes / 1048576, 'MiB', specsFigure),
    figure(
      'heap: embedded catalog with 10,000 tools (index, registry, KV)',
      embedded.bytes / 1048576,
      'MiB',
      specsFigure,
    ),
  );
  return figures;
}
