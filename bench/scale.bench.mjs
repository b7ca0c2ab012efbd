// Fleet scale: 1,000 tool workers (full ToolWorkers, one NATS connection each, 10 tools each: 10,000 tools) held by a
// few processes, against the catalog in a process of its own and 2 planners. Measures registering them all, the
// catalog's CPU and heartbeat rate at steady state, search while the heartbeats run, noticing 100 workers killed at
// once, and tool calls spread over the 1,000 against the same calls to 10. Writes the per-message costs the scaling
// model (scripts/simulate-scale.mjs) reads to bench/scale-costs.json.
import { fork, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import {
  CatalogRegisterReplySchema,
  NatsBus,
  encodeJson,
  invokeTool,
  requestJson,
  silentLogger,
  subjects,
} from '@agentmesh/protocol';
import { syntheticTools } from './catalog.bench.mjs';
import { figure, latencyFigures, measure, processCpuUs } from './lib.mjs';

export const title = 'Fleet scale: 1,000 workers, 10,000 tools, catalog and 2 planners';

const WORKERS = 1000;
const KILLED = 100;
const TOOLS_PER_WORKER = 10;
/** Heartbeats every second (5x the default rate): 1,000 workers beat as 5,000 would at the default 5 s. */
const HEARTBEAT_MS = 1000;
const TTL_MS = HEARTBEAT_MS * 3;
const HOLDERS = [
  [0, 300],
  [300, 600],
  [600, 900],
  [900, 1000],
];
const here = new URL('.', import.meta.url);

function forkChild(script, args, execArgv = []) {
  const child = fork(new URL(script, here), args, {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    execArgv,
  });
  const exited = new Promise((r) => child.once('exit', r));
  return { child, exited, next: (key) => nextMessage(child, key) };
}

function nextMessage(child, key) {
  return new Promise((resolve, reject) => {
    const onMessage = (m) => {
      if (m[key] === undefined) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      resolve(m);
    };
    const onExit = (code) => reject(new Error(`${key}: child exited with ${code} before answering`));
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}

/** The catalog process, asked over IPC (`count`, `usage`, `memory`). */
async function startCatalog(natsUrl, prefix, bucket) {
  const proc = forkChild('./scale-catalog.mjs', [natsUrl, prefix, bucket], ['--expose-gc']);
  await proc.next('up');
  let seq = 0;
  const ask = async (what) => {
    const id = ++seq;
    const answer = new Promise((resolve) => {
      const on = (m) => m.id === id && (proc.child.off('message', on), resolve(m.value));
      proc.child.on('message', on);
    });
    proc.child.send({ ask: what, id });
    return answer;
  };
  return { ...proc, ask };
}

function startPlanner(natsUrl, prefix, id) {
  const child = spawn(
    process.execPath,
    [new URL('./accept-planner.mjs', here).pathname, natsUrl, prefix, id],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const ready = new Promise((resolve, reject) => {
    child.stdout.once('data', resolve);
    child.once('exit', (code) => reject(new Error(`planner ${id} exited with ${code}`)));
  });
  return { child, ready, exited: new Promise((r) => child.once('exit', r)) };
}

async function waitFor(check, timeoutMs, what) {
  const t0 = performance.now();
  for (;;) {
    if (await check()) return performance.now() - t0;
    if (performance.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * CPU the catalog (and the nats-server, when this bench started it) used over `ms`, as a share of one core, and the
 * heartbeats that reached the catalog meanwhile.
 */
async function steadyState(catalog, bus, prefix, ms, serverPid) {
  let beats = 0;
  const sub = bus.subscribe(subjects(prefix).catalogHeartbeat, () => void beats++);
  await bus.flush();
  const a = await catalog.ask('usage');
  const serverA = processCpuUs(serverPid);
  await new Promise((r) => setTimeout(r, ms));
  const b = await catalog.ask('usage');
  const serverB = processCpuUs(serverPid);
  sub.unsubscribe();
  const wall = b.at_ms - a.at_ms;
  return {
    cpu: (b.cpu_us - a.cpu_us) / 1000 / wall,
    server: serverA === undefined ? undefined : (serverB - serverA) / 1000 / wall,
    beatsPerSecond: (beats / wall) * 1000,
  };
}

/** The floor of registering: the same 1,000 requests of 10 specs from one connection, 8 in flight. */
async function registrationFloor(bus, prefix) {
  const specs = syntheticTools(WORKERS * TOOLS_PER_WORKER).map((t) => ({ ...t, name: `floor${t.name}` }));
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < WORKERS) {
        const w = next++;
        await requestJson(
          bus,
          subjects(prefix).catalogRegister,
          {
            worker_id: `floor-w${w}`,
            tools: specs.slice(w * TOOLS_PER_WORKER, (w + 1) * TOOLS_PER_WORKER),
            ttl_ms: 600_000,
          },
          CatalogRegisterReplySchema,
          { timeoutMs: 30_000 },
        );
      }
    }),
  );
  return performance.now() - t0;
}

/**
 * The floor of the events stream: 20,000 appends of 300 bytes to a file stream of per-run subjects (1,000 runs),
 * 256 in flight, by bare nats.js; appends per second.
 */
async function streamFloor(raw, id, quick) {
  const jsm = await jetstreamManager(raw);
  const js = jetstream(raw);
  const name = `BENCH_SCALE_EVENTS_${id}`;
  await jsm.streams.add({ name, subjects: [`benchscaleev${id}.runs.*.events`], storage: 'file' });
  const body = new Uint8Array(300).fill(120);
  const count = quick ? 5000 : 20_000;
  let next = 0;
  const t0 = performance.now();
  try {
    await Promise.all(
      Array.from({ length: 256 }, async () => {
        while (next < count) {
          const i = next++;
          await js.publish(`benchscaleev${id}.runs.r${i % 1000}.events`, body);
        }
      }),
    );
    return (count / (performance.now() - t0)) * 1000;
  } finally {
    await jsm.streams.delete(name).catch(() => undefined);
  }
}

async function callThroughput(bus, prefix, names, count) {
  let seq = 0;
  const call = async (i) => {
    const outcome = await invokeTool(
      bus,
      { call_id: `c${++seq}`, run_id: 'run-scale', tool: names[i % names.length], arguments: { n: i } },
      { prefix },
    );
    if (outcome.is_error) throw new Error(`call failed: ${JSON.stringify(outcome.error)}`);
  };
  return measure(call, { count, concurrency: 64, warmup: Math.min(names.length, count) });
}

const SEARCH_BODIES = [
  'read a file',
  'list open pull requests',
  'compute sha256 of text',
  'send an email',
].map((q) => encodeJson({ query: q, limit: 10, deferred_only: false }));

/** tool_search latency, one request in flight, over the queries above. */
function searchMeasure(bus, prefix, quick) {
  const s = subjects(prefix);
  return measure((i) => bus.request(s.catalogSearch, SEARCH_BODIES[i % SEARCH_BODIES.length]), {
    count: quick ? 500 : 2000,
  });
}

async function searchFigures(bus, raw, prefix, quick, quiet) {
  raw.subscribe(`${prefix}.raw`, { callback: (_e, m) => m.respond(m.data) });
  await raw.flush();
  const rawR = await measure(() => raw.request(`${prefix}.raw`, SEARCH_BODIES[0], { timeout: 5000 }), {
    count: quick ? 500 : 2000,
  });
  const searchR = await searchMeasure(bus, prefix, quick);
  return [
    ...latencyFigures(
      'tool_search bm25, 10,000 tools, 1,000 workers heartbeating',
      searchR,
      'raw NATS request/reply',
      rawR,
    ),
    ...latencyFigures(
      'tool_search bm25 with the heartbeats',
      searchR,
      'the same search, same tools, before any worker connected',
      quiet,
    ).slice(0, 2),
  ];
}

/** Whether a regex search for exactly `name` finds it. */
async function searchable(bus, prefix, name) {
  const pattern = `^${name.replace(/[.]/g, '\\.')}$`;
  const reply = await bus.request(
    subjects(prefix).catalogSearch,
    encodeJson({ query: pattern, strategy: 'regex', limit: 5, deferred_only: false }),
  );
  const body = JSON.parse(new TextDecoder().decode(reply.data));
  return body.results.some((t) => t.name === name);
}

async function startHolders(natsUrl, prefix, ranges, namePrefix = '') {
  return Promise.all(
    ranges.map(async ([from, to]) => {
      const proc = forkChild('./scale-workers.mjs', [
        natsUrl,
        prefix,
        String(from),
        String(to),
        String(HEARTBEAT_MS),
        namePrefix,
      ]);
      return { ...proc, range: [from, to] };
    }),
  );
}

const stopChild = async (p) => {
  if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM');
  await p.exited;
};

export async function run({ natsUrl, quick, serverPid }) {
  const id = randomUUID().slice(0, 8);
  const prefix = `benchscale${id}`;
  const bucket = `bench_scale_${id}`;
  const figures = [];
  const costs = { heartbeat_ms: HEARTBEAT_MS, workers: WORKERS, tools_per_worker: TOOLS_PER_WORKER };
  const bus = await NatsBus.connect(natsUrl, { logger: silentLogger() });
  const raw = await connect({ servers: natsUrl, noAsyncTraces: true });
  const catalog = await startCatalog(natsUrl, prefix, bucket);
  const planners = [
    startPlanner(natsUrl, prefix, `scale-p1-${id}`),
    startPlanner(natsUrl, prefix, `scale-p2-${id}`),
  ];
  const children = [catalog, ...planners];
  try {
    await Promise.all(planners.map((p) => p.ready));
    const idle = await steadyState(catalog, bus, prefix, 2000, serverPid);
    const memBefore = await catalog.ask('memory');
    // the floors, on a catalog process of their own (so the measured one starts empty): the same registrations from
    // one connection, and the same searches over the same tools with no heartbeat at all
    const floorCatalog = await startCatalog(natsUrl, `${prefix}f`, `${bucket}_f`);
    children.push(floorCatalog);
    const floorMs = await registrationFloor(bus, `${prefix}f`);
    const quiet = await searchMeasure(bus, `${prefix}f`, quick);
    await stopChild(floorCatalog);

    const holders = await startHolders(natsUrl, prefix, HOLDERS);
    children.push(...holders);
    const built = await Promise.all(holders.map((h) => h.next('built')));
    const t0 = performance.now();
    for (const h of holders) h.child.send({ go: true });
    const connected = await Promise.all(holders.map((h) => h.next('connected')));
    const connectedMs = performance.now() - t0;
    await Promise.all(holders.map((h) => h.next('registered')));
    await waitFor(
      async () => (await catalog.ask('count')) === WORKERS * TOOLS_PER_WORKER,
      60_000,
      'all 10,000 tools live',
    );
    const registerMs = performance.now() - t0;
    const floor = figure(
      'register floor: 1,000 requests of 10 specs from one connection, 8 in flight',
      floorMs,
      'ms',
    );
    figures.push(
      floor,
      figure('1,000 workers connected and serving (4 processes)', connectedMs, 'ms'),
      figure('register 1,000 workers x 10 tools, from connecting to all live', registerMs, 'ms', floor),
      figure(
        'worker side: defining 10 tools (JSON Schema, ajv), per worker',
        Math.max(...built.map((b, i) => b.ms / (HOLDERS[i][1] - HOLDERS[i][0]))),
        'ms',
      ),
    );
    costs.connect_ms_max = Math.max(...connected.map((c) => c.ms));
    costs.register_us = (floorMs * 1000) / WORKERS;
    costs.register_all_ms = registerMs;

    await new Promise((r) => setTimeout(r, 2 * HEARTBEAT_MS));
    const memAfter = await catalog.ask('memory');
    const steady = await steadyState(catalog, bus, prefix, quick ? 3000 : 6000, serverPid);
    const idleCpu = figure('catalog CPU, no workers', idle.cpu * 100, '% of a core');
    figures.push(
      idleCpu,
      figure('catalog CPU, 1,000 workers heartbeating every 1 s', steady.cpu * 100, '% of a core', idleCpu),
      figure('heartbeats reaching the catalog', steady.beatsPerSecond, 'msg/s'),
      ...(steady.server === undefined
        ? []
        : [
            figure('nats-server CPU, no workers', idle.server * 100, '% of a core'),
            figure('nats-server CPU, 1,000 workers heartbeating', steady.server * 100, '% of a core'),
          ]),
      figure('catalog CPU per heartbeat', ((steady.cpu - idle.cpu) * 1e6) / steady.beatsPerSecond, 'us'),
      figure(
        'catalog heap per worker connection (10 tools)',
        (memAfter.heap - memBefore.heap) / WORKERS / 1024,
        'KB',
      ),
      figure(
        'catalog RSS per worker connection (10 tools)',
        (memAfter.rss - memBefore.rss) / WORKERS / 1024,
        'KB',
      ),
    );
    costs.heartbeat_cpu_us = ((steady.cpu - idle.cpu) * 1e6) / steady.beatsPerSecond;
    costs.heartbeats_per_s = steady.beatsPerSecond;
    costs.catalog_cpu_share = steady.cpu;
    if (steady.server !== undefined)
      costs.server_cpu_per_heartbeat_us = ((steady.server - idle.server) * 1e6) / steady.beatsPerSecond;

    const search = await searchFigures(bus, raw, prefix, quick, quiet);
    figures.push(...search);
    costs.search_p50_us = search[0].value;
    costs.search_p99_us = search[1].value;
    costs.raw_request_p50_us = search[0].value / search[0].ratio;
    costs.search_quiet_p50_us = quiet.p50_us;
    costs.search_quiet_p99_us = quiet.p99_us;

    const callCount = quick ? 5000 : 20_000;
    const fleetNames = syntheticTools(WORKERS * TOOLS_PER_WORKER).map((t) => t.name);
    const fleetCalls = await callThroughput(bus, prefix, fleetNames, callCount);
    const base = await startHolders(natsUrl, prefix, [[0, 10]], 'base');
    children.push(...base);
    await base[0].next('built');
    base[0].child.send({ go: true });
    await base[0].next('registered');
    const baseNames = syntheticTools(10 * TOOLS_PER_WORKER).map((t) => `base${t.name}`);
    const baseCalls = await callThroughput(bus, prefix, baseNames, callCount);
    await stopChild(base[0]);
    figures.push(
      ...latencyFigures(
        'tool calls over 1,000 workers (10,000 tools), 64 in flight',
        fleetCalls,
        'the same calls to 10 workers (100 tools)',
        baseCalls,
      ),
    );
    costs.call_p50_us = fleetCalls.p50_us;
    costs.call_throughput = fleetCalls.throughput;
    costs.call_throughput_10 = baseCalls.throughput;

    const victims = holders.find((h) => h.range[1] - h.range[0] === KILLED);
    const victimTool = fleetNames[victims.range[0] * TOOLS_PER_WORKER];
    const survivorTool = fleetNames[0];
    if (!(await searchable(bus, prefix, victimTool)))
      throw new Error(`${victimTool} not searchable before the kill`);
    const killedAt = performance.now();
    victims.child.kill('SIGKILL');
    const noticedMs = await waitFor(
      async () => (await catalog.ask('count')) === (WORKERS - KILLED) * TOOLS_PER_WORKER,
      TTL_MS * 5,
      '100 killed workers expired',
    ).then(() => performance.now() - killedAt);
    const goneMs = await waitFor(
      async () => !(await searchable(bus, prefix, victimTool)),
      10_000,
      'killed tools left search',
    ).then(() => performance.now() - killedAt);
    if (!(await searchable(bus, prefix, survivorTool))) throw new Error('a live worker left search');
    const ttl = figure('worker ttl (3 heartbeats)', TTL_MS, 'ms');
    figures.push(
      ttl,
      figure('100 workers killed at once: expired in the catalog', noticedMs, 'ms', ttl),
      figure('100 workers killed at once: their tools gone from search', goneMs, 'ms', ttl),
    );
    costs.expiry_ms = noticedMs;
    const appends = await streamFloor(raw, id, quick);
    figures.push(
      figure(
        'JetStream: appends/s to one file stream of per-run subjects, 256 in flight (bare nats.js)',
        appends,
        'msg/s',
      ),
    );
    costs.stream_appends_per_s = appends;
  } finally {
    await Promise.all(children.map(stopChild));
    const jsm = await bus.jetstreamManager();
    await jsm.streams.delete(`KV_${bucket}`).catch(() => undefined);
    await jsm.streams.delete(`KV_${bucket}_f`).catch(() => undefined);
    await Promise.all([bus.close(), raw.close()]);
  }
  writeFileSync(new URL('./scale-costs.json', here), `${JSON.stringify(costs, null, 2)}\n`);
  return figures;
}
