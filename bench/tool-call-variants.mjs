// Experiment behind docs/benchmarks.md "Issue 37, third sitting": where a request/reply over NATS spends its time at
// 1 and 64 in flight, and why Moleculer's transporter beats a raw nc.request. Each variant runs in a process of its
// own (caller and server in it, two connections); not part of `npm run bench`. Against a nats-server with JetStream:
//   node bench/tool-call-variants.mjs NATS_URL ROUNDS v1,v2,...   variants alternated over rounds: @1 p50, CPU a
//                                   call, @64 throughput and p99 (SERVER_PID=... adds the server's CPU a call)
//   node bench/tool-call-variants.mjs --trace VARIANT NATS_URL [N]  at 1 in flight, the median time of each leg:
//                                   request on the wire, server read -> write, reply on the wire, caller read -> write
//   node bench/tool-call-variants.mjs --one VARIANT NATS_URL CONCURRENCY COUNT   (PROF=file.cpuprofile to profile)
//   node bench/tool-call-variants.mjs --tail VARIANT NATS_URL CONCURRENCY COUNT  (how much of the tail is GC)
//   node bench/tool-call-variants.mjs --steady VARIANT NATS_URL CONCURRENCY COUNT  (one long run after a warm-up: wall,
//                                   p99 and the CPU of each thread; add --trace-gc-nvp to see each scavenge)
// PRE=us / BUSY=us: the bare round trip's server busy-waits that long before / after it writes its answer (what an
// idle core's wake-up adds to the wait; docs/benchmarks.md, "Issue 37, seventh sitting").
// Pin it to the core the server does not use (taskset -c 1) as `npm run bench` does.
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { mathCalcInvocations, measure, median, pinToCores, processCpuUs, startMathWorker } from './lib.mjs';

const SELF = fileURLToPath(import.meta.url);
const PRE_US = Number(process.env.PRE ?? 0);
const BUSY_US = Number(process.env.BUSY ?? 0);
const spin = (us) => {
  const until = performance.now() + us / 1000;
  while (performance.now() < until);
};
/** PAD=n pads the request by n bytes (does size matter at 1 in flight? not up to 1 KB). */
const PAD = process.env.PAD ? 'x'.repeat(Number(process.env.PAD)) : undefined;
const REQUEST = Buffer.from(
  JSON.stringify({
    ...(PAD ? { pad: PAD } : {}),
    call_id: 'c-123456',
    run_id: 'run-bench',
    tool: 'math.calc',
    arguments: { lhs: 2, rhs: 3, op: 'add' },
    idempotency_key: 'run-bench:c-1',
    progress_subject: '_INBOX.abcdefghijklmnopqrstuv.1',
  }),
);
const REPLY = Buffer.from(
  JSON.stringify({
    call_id: 'c-123456',
    tool: 'math.calc',
    is_error: false,
    content: { result: 5 },
    worker_id: 'worker-abcdefgh',
    duration_ms: 0,
    attempt: 1,
  }),
);

async function v3() {
  return import('@nats-io/transport-node');
}
async function v2() {
  return import('nats');
}

/** Two `NatsBus` connections' nats.js connections, for `variant`'s `pair`. */
async function busPair() {
  const { NatsBus } = await import('@agentmesh/protocol');
  return [(await NatsBus.connect(process.argv[4])).nc, (await NatsBus.connect(process.argv[4])).nc];
}

/**
 * `lib` connect; `reply`: how replies come back ('request' | 'literal' | 'wild'); `timer`: a setTimeout a call;
 * `extra.pair` makes the client and server connections instead.
 */
async function variant(lib, reply, timer, extra = {}) {
  const { connect } = lib === 'v2' ? await v2() : await v3();
  const natsUrl = process.argv[4];
  const subject = `exp${process.pid}.svc`;
  const { queueGroup, pair, ...opts } = extra;
  const [client, server] = pair
    ? await pair()
    : [
        await connect({ servers: natsUrl, noAsyncTraces: true, ...opts }),
        await connect({ servers: natsUrl, noAsyncTraces: true, ...opts }),
      ];
  if (reply === 'request') {
    server.subscribe(subject, { callback: (_e, m) => m.respond(REPLY) });
    await server.flush();
    return { conns: [client, server], call: () => client.request(subject, REQUEST, { timeout: 5000 }) };
  }
  // the id travels in the first 8 bytes of the body (as Moleculer's does inside its JSON)
  server.subscribe(subject, {
    ...(extra.queueGroup ? { queue: 'q' } : {}),
    callback: (_e, m) => {
      if (PRE_US) spin(PRE_US);
      const out = Buffer.allocUnsafe(8 + REPLY.length);
      out.set(m.data.subarray(0, 8), 0);
      out.set(REPLY, 8);
      server.publish(m.reply, out);
      // after nats-core's flush, which it queued as a microtask at the publish
      if (BUSY_US) queueMicrotask(() => spin(BUSY_US));
    },
  });
  const pending = new Map();
  const inbox = `_INBOX.exp${process.pid}`;
  const onReply = (_e, m) => {
    const id = Buffer.from(m.data.buffer, m.data.byteOffset, 8).toString('latin1');
    const p = pending.get(id);
    if (p === undefined) return;
    pending.delete(id);
    if (p.t !== undefined) clearTimeout(p.t);
    p.resolve(m);
  };
  client.subscribe(reply === 'literal' ? inbox : `${inbox}.*`, { callback: onReply });
  await server.flush();
  await client.flush();
  let seq = 0;
  return {
    conns: [client, server],
    call: () =>
      new Promise((resolve, reject) => {
        const id = (++seq).toString(36).padStart(8, '0');
        const p = { resolve, t: undefined };
        if (timer) p.t = setTimeout(() => (pending.delete(id), reject(new Error('timeout'))), 5000);
        pending.set(id, p);
        const body = Buffer.allocUnsafe(8 + REQUEST.length);
        body.write(id, 0, 'latin1');
        body.set(REQUEST, 8);
        client.publish(subject, body, {
          reply: reply === 'literal' ? inbox : reply === 'wild-const' ? `${inbox}.fixed` : `${inbox}.${id}`,
        });
      }),
  };
}

async function agentmesh(pendingLimit) {
  const { NatsBus, invokeTool } = await import('@agentmesh/protocol');
  const natsUrl = process.argv[4];
  const prefix = `exp${process.pid}`;
  const workerBus = await NatsBus.connect(natsUrl);
  const clientBus = await NatsBus.connect(natsUrl);
  if (pendingLimit !== undefined)
    for (const bus of [workerBus, clientBus]) bus.nc.protocol.pendingLimit = pendingLimit;
  const worker = await startMathWorker(workerBus, prefix);
  const invocation = mathCalcInvocations();
  const marks = [];
  if (process.env.MARKS) {
    // timestamps inside the worker's and the caller's path (monkey-patched, this experiment only)
    const { performance } = await import('node:perf_hooks');
    const wrap = (obj, name, label) => {
      const f = obj[name];
      if (typeof f !== 'function') return; // a method this build does not have
      obj[name] = function (...a) {
        marks.push([performance.now(), label]);
        return f.apply(this, a);
      };
    };
    wrap(worker, 'onInvoke', 'w.onInvoke');
    wrap(worker.executor, 'run', 'w.run');
    wrap(worker, 'respondOutcome', 'w.respond');
    if (process.env.MARKS === '2') {
      wrap(worker, 'executeParsed', 'w.executeParsed');
      wrap(worker, 'answered', 'w.answered');
      wrap(worker.executor, 'attempt', 'w.attempt');
      wrap(worker.executor, 'startAttempt', 'w.startAttempt');
      wrap(worker.executor, 'succeeded', 'w.succeeded');
      wrap(worker.executor, 'completed', 'w.completed');
      wrap(clientBus, 'respond', 'w.bus.respond');
      wrap(workerBus, 'respond', 'w.bus.respond');
      wrap(workerBus.nc, 'publish', 'w.nc.publish');
      wrap(clientBus.nc, 'publish', 'c.nc.publish');
    }
    wrap(clientBus, 'request', 'c.request');
    wrap(clientBus, 'requestCallback', 'c.request');
    const { progressRouter } = await import(
      new URL('../packages/protocol/dist/tool-progress-router.js', import.meta.url).href
    );
    wrap(progressRouter(clientBus), 'settle', 'c.settle');
  }
  return {
    marks: process.env.MARKS ? marks : undefined,
    stats: () => ({ worker: workerBus.nc.stats(), client: clientBus.nc.stats() }),
    conns: [clientBus.nc, workerBus.nc],
    call: () => invokeTool(clientBus, invocation(), { prefix }),
  };
}

/** `NatsBus.request` against `NatsBus.subscribe` and `respond`. */
async function busRequest() {
  const { NatsBus } = await import('@agentmesh/protocol');
  const natsUrl = process.argv[4];
  const subject = `exp${process.pid}.svc`;
  const clientBus = await NatsBus.connect(natsUrl);
  const serverBus = await NatsBus.connect(natsUrl);
  serverBus.subscribe(subject, (m) => void serverBus.respond(m, REPLY));
  await serverBus.flush();
  return {
    conns: [clientBus.nc, serverBus.nc],
    call: () => clientBus.request(subject, REQUEST, { timeoutMs: 5000 }),
  };
}

/**
 * One side of agentmesh's call: `worker` a `ToolWorker` asked by a bare `NatsBus.request`, `caller` `invokeTool`
 * against a bare responder that parses the invocation and answers an outcome (the JSON, nothing else).
 */
async function halfCall(side) {
  const { NatsBus, invokeTool } = await import('@agentmesh/protocol');
  const natsUrl = process.argv[4];
  const prefix = `exp${process.pid}`;
  const clientBus = await NatsBus.connect(natsUrl);
  const serverBus = await NatsBus.connect(natsUrl);
  const conns = [clientBus.nc, serverBus.nc];
  const subject = `${prefix}.tool.invoke.math.calc`;
  const invocation = mathCalcInvocations();
  if (side === 'worker') {
    await startMathWorker(serverBus, prefix);
    return {
      conns,
      call: () => clientBus.request(subject, JSON.stringify(invocation()), { timeoutMs: 5000 }),
    };
  }
  serverBus.subscribe(subject, (m) => {
    const { call_id } = JSON.parse(m.text());
    const outcome = { call_id, tool: 'math.calc', worker_id: 'w-1', is_error: false, output: { result: 5 } };
    serverBus.respond(m, JSON.stringify({ ...outcome, preview: '{"result":5}', elapsed_ms: 0, attempts: 1 }));
  });
  await serverBus.flush();
  return { conns, call: () => invokeTool(clientBus, invocation(), { prefix }) };
}

/** `withParams`: the action declares its `params`, which Moleculer's built-in fastest-validator checks every call. */
async function moleculer(withParams = false) {
  const { ServiceBroker } = (await import('moleculer')).default;
  const natsUrl = process.argv[4];
  const broker = (nodeID) =>
    new ServiceBroker({ namespace: `exp${process.pid}`, nodeID, transporter: natsUrl, logger: false });
  const server = broker('mol-server');
  const handler = (ctx) => ({ result: ctx.params.lhs + ctx.params.rhs });
  const params = { lhs: 'number', rhs: 'number', op: { type: 'enum', values: ['add', 'sub', 'mul', 'div'] } };
  server.createService({ name: 'math', actions: { calc: withParams ? { params, handler } : handler } });
  const client = broker('mol-client');
  await server.start();
  await client.start();
  await client.waitForServices(['math'], 10_000);
  return {
    conns: [client.transit.tx.client, server.transit.tx.client],
    call: () => client.call('math.calc', { lhs: 2, rhs: 3, op: 'add' }),
  };
}

const VARIANTS = {
  agentmesh: () => agentmesh(),
  'bus-literal': () => variant('v3', 'literal', false, { pair: busPair }),
  'bus-request': () => busRequest(),
  'half-worker': () => halfCall('worker'),
  'half-caller': () => halfCall('caller'),
  'agentmesh-32k': () => agentmesh(32 * 1024),
  'agentmesh-1m': () => agentmesh(1024 * 1024),
  'agentmesh-4k': () => agentmesh(4 * 1024),
  'agentmesh-2k': () => agentmesh(2 * 1024),
  moleculer: () => moleculer(),
  'moleculer-params': () => moleculer(true),
  'v3-request': () => variant('v3', 'request'),
  'v3-literal': () => variant('v3', 'literal', false),
  'v3-literal-timer': () => variant('v3', 'literal', true),
  'v3-wild': () => variant('v3', 'wild', false),
  'v3-literal-queue': () => variant('v3', 'literal', false, { queueGroup: true }),
  'v3-wild-queue': () => variant('v3', 'wild', false, { queueGroup: true }),
  'v3-wild-const': () => variant('v3', 'wild-const', false),
  'v3-wild-timer': () => variant('v3', 'wild', true),
  'v2-request': () => variant('v2', 'request'),
  'v2-literal': () => variant('v2', 'literal', false),
  'v2-wild-timer': () => variant('v2', 'wild', true),
};

async function child(name) {
  const v = await VARIANTS[name]();
  process.on('message', async (msg) => {
    if (msg.stop) process.exit(0);
    const before = process.cpuUsage();
    const r = await measure(v.call, msg);
    const cpu = process.cpuUsage(before);
    process.send({ ...r, cpu_us: (cpu.user + cpu.system) / (msg.count + Math.min(200, msg.count)) });
  });
  process.send({ ready: true });
}

async function driver(natsUrl, rounds, names) {
  const kids = [];
  for (const name of names) {
    const c = fork(SELF, ['--child', name, natsUrl], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    pinToCores(c.pid, process.env.CORES ?? '1');
    await new Promise((r) => c.once('message', r));
    kids.push(c);
  }
  const ask = (c, m) => new Promise((r) => (c.once('message', r), c.send(m)));
  const res = names.map(() => ({ p50: [], cpu: [], tput: [], p99: [], srv: [], srv1: [] }));
  const serverPid = process.env.SERVER_PID;
  const serverCpu = () => (serverPid ? (processCpuUs(serverPid) ?? 0) : 0);
  for (let b = 0; b < rounds; b++)
    for (let i = 0; i < names.length; i++) {
      const k = (b + i) % names.length;
      const s1 = serverCpu();
      const one = await ask(kids[k], { count: 2000, concurrency: 1 });
      res[k].srv1.push((serverCpu() - s1) / 2200);
      const s0 = serverCpu();
      const many = await ask(kids[k], { count: 3000, concurrency: 64 });
      res[k].srv.push((serverCpu() - s0) / 3200);
      res[k].p50.push(one.p50_us);
      res[k].cpu.push(one.cpu_us);
      res[k].tput.push(many.throughput);
      res[k].p99.push(many.p99_us);
    }
  for (const c of kids) c.send({ stop: true });
  const f = (x) => x.toFixed(0).padStart(7);
  console.log(
    'variant'.padEnd(20),
    '@1 p50 us',
    'cpu/call us',
    '@64 ops/s',
    '@64 p99 us',
    'srv us/call@64',
    'srv us/call@1',
  );
  names.forEach((n, i) =>
    console.log(
      n.padEnd(20),
      f(median(res[i].p50)),
      f(median(res[i].cpu)),
      f(median(res[i].tput)),
      f(median(res[i].p99)),
      f(median(res[i].srv)),
      f(median(res[i].srv1)),
    ),
  );
}

async function tail(call, count, concurrency) {
  // per-call start/end and GC pauses: how much of the tail overlaps a garbage collection
  const { PerformanceObserver, performance } = await import('node:perf_hooks');
  const gcs = [];
  const obs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcs.push([e.startTime, e.startTime + e.duration, e.detail?.kind]);
  });
  obs.observe({ entryTypes: ['gc'] });
  const t0 = new Float64Array(count);
  const t1 = new Float64Array(count);
  let next = 0;
  async function lane() {
    for (;;) {
      const i = next++;
      if (i >= count) return;
      t0[i] = performance.now();
      await call();
      t1[i] = performance.now();
    }
  }
  await Promise.all(Array.from({ length: concurrency }, lane));
  await new Promise((r) => setTimeout(r, 50));
  obs.disconnect();
  const lat = Array.from(t0, (s, i) => t1[i] - s);
  const sorted = [...lat].sort((a, b) => a - b);
  const p = (q, a) => (a[Math.floor(q * a.length)] * 1000).toFixed(0);
  const inGc = (i) => gcs.some(([a, b]) => a < t1[i] && b > t0[i]);
  const clean = lat.filter((_, i) => !inGc(i)).sort((a, b) => a - b);
  const gcMs = gcs.reduce((s, [a, b]) => s + b - a, 0);
  // the slowest 1%: in how many separate stalls (windows of overlapping calls) do they fall?
  const cut = sorted[Math.floor(0.99 * count)];
  const slow = lat
    .map((l, i) => [t0[i], t1[i], l])
    .filter(([, , l]) => l >= cut)
    .sort((a, b) => a[0] - b[0]);
  let stalls = 0;
  let end = -Infinity;
  for (const [a, b] of slow) {
    if (a > end) stalls++;
    end = Math.max(end, b);
  }
  console.log(
    `p50 ${p(0.5, sorted)} p99 ${p(0.99, sorted)} p99-without-gc-overlap ${p(0.99, clean)} (${count - clean.length} calls overlap gc)`,
    `slowest 1% (${slow.length} calls) in ${stalls} stalls;`,
    `gc: ${gcs.length} pauses, ${gcMs.toFixed(1)} ms, max ${Math.max(...gcs.map(([a, b]) => b - a)).toFixed(2)} ms; wall ${(t1.reduce((m, x) => Math.max(m, x), 0) - t0[0]).toFixed(0)} ms`,
  );
}

async function steady(v, concurrency, count) {
  // one long run after a warm-up of a third of it: wall, p99, and the CPU of each thread of this process
  const { readdirSync } = await import('node:fs');
  await measure(v.call, { concurrency, count: Math.ceil(count / 3) });
  const threadsCpuMs = () =>
    Object.fromEntries(
      readdirSync('/proc/self/task').map((tid) => {
        const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8').split(') ')[1].split(' ');
        return [tid, (Number(stat[11]) + Number(stat[12])) * 10];
      }),
    );
  const before = threadsCpuMs();
  const t0 = performance.now();
  const r = await measure(v.call, { concurrency, count, warmup: 0 });
  const wall = performance.now() - t0;
  const after = threadsCpuMs();
  const threads = Object.entries(after)
    .map(([tid, ms]) => `${tid}: ${ms - (before[tid] ?? 0)} ms`)
    .join(', ');
  console.log(
    `wall ${wall.toFixed(0)} ms, p50 ${r.p50_us.toFixed(0)} us, p99 ${r.p99_us.toFixed(0)} us; CPU ${threads}`,
  );
}

async function trace(v, count) {
  // when each connection reads and writes, at 1 in flight: caller = client conn, server = responder conn
  const { performance } = await import('node:perf_hooks');
  const ev = [];
  const idle = [];
  v.conns.forEach((nc, who) => {
    const t = nc.protocol.transport;
    const send = t.send.bind(t);
    t.send = (frame) => {
      const at = performance.now();
      ev.push([at, who, 'w']);
      v.marks?.push([at, `${who}.w`]);
      send(frame);
      if (process.env.IDLE) setImmediate(() => idle.push(performance.now() - at));
    };
    t.socket.on('data', () => {
      const at = performance.now();
      ev.push([at, who, 'r']);
      v.marks?.push([at, `${who}.r`]);
    });
  });
  if (v.marks) v.marks.length = 0;
  for (let i = 0; i < count; i++) await v.call();
  // cycle: C.w -> S.r -> S.w -> C.r -> C.w
  const S = [],
    C = [],
    N1 = [],
    N2 = [];
  for (let i = 0; i + 4 < ev.length; i++) {
    const [a, b, c, d, e] = ev.slice(i, i + 5);
    if (
      a[1] === 0 &&
      a[2] === 'w' &&
      b[1] === 1 &&
      b[2] === 'r' &&
      c[1] === 1 &&
      c[2] === 'w' &&
      d[1] === 0 &&
      d[2] === 'r' &&
      e[1] === 0 &&
      e[2] === 'w'
    ) {
      N1.push(b[0] - a[0]);
      S.push(c[0] - b[0]);
      N2.push(d[0] - c[0]);
      C.push(e[0] - d[0]);
    }
  }
  const med = (a) => (median(a) * 1000).toFixed(1);
  if (v.marks?.length) {
    // median time from each mark to the next, by pair of labels
    const gaps = new Map();
    for (let i = 1; i < v.marks.length; i++) {
      const k = `${v.marks[i - 1][1]} -> ${v.marks[i][1]}`;
      if (!gaps.has(k)) gaps.set(k, []);
      gaps.get(k).push(v.marks[i][0] - v.marks[i - 1][0]);
    }
    for (const [k, g] of gaps) if (g.length > count / 2) console.log(`  ${k}: ${med(g)} us (${g.length})`);
  }
  console.log(
    `cycles ${S.length}/${count}: request on the wire ${med(N1)} us, server read->write ${med(S)} us, reply on the wire ${med(N2)} us, caller read->next write ${med(C)} us${idle.length ? `, write->check phase ${med(idle)} us` : ''}`,
  );
}

if (process.argv[2] === '--child') await child(process.argv[3]);
else if (process.argv[2] === '--trace') {
  const v = await VARIANTS[process.argv[3]]();
  for (let i = 0; i < 2000; i++) await v.call();
  await trace(v, Number(process.argv[5] ?? 5000));
  process.exit(0);
} else if (process.argv[2] === '--steady') {
  await steady(await VARIANTS[process.argv[3]](), Number(process.argv[5]), Number(process.argv[6]));
  process.exit(0);
} else if (process.argv[2] === '--tail') {
  const v = await VARIANTS[process.argv[3]]();
  await measure(v.call, { count: 5000, concurrency: 64 });
  for (let i = 0; i < 3; i++) await tail(v.call, Number(process.argv[6]), Number(process.argv[5]));
  process.exit(0);
} else if (process.argv[2] === '--one') {
  // --one VARIANT NATS_URL CONCURRENCY COUNT: one variant measured once in this process (for --cpu-prof)
  const v = await VARIANTS[process.argv[3]]();
  const opts = { concurrency: Number(process.argv[5]), count: Number(process.argv[6]) };
  await measure(v.call, opts);
  const inspector = process.env.PROF ? await import('node:inspector/promises') : undefined;
  const session = inspector && new inspector.Session();
  if (session) {
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 100 });
    await session.post('Profiler.start');
  }
  const before = process.cpuUsage();
  const elu0 = performance.eventLoopUtilization();
  const r = await measure(v.call, opts);
  const cpu = process.cpuUsage(before);
  const elu = performance.eventLoopUtilization(elu0).utilization;
  if (session) {
    const { profile } = await session.post('Profiler.stop');
    (await import('node:fs')).writeFileSync(process.env.PROF, JSON.stringify(profile));
  }
  if (v.stats) console.log(JSON.stringify(v.stats()));
  console.log(
    process.argv[3],
    JSON.stringify(r),
    'cpu us/call',
    ((cpu.user + cpu.system) / (opts.count + Math.min(200, opts.count))).toFixed(1),
    'event loop busy',
    elu.toFixed(2),
  );
  process.exit(0);
} else
  await driver(
    process.argv[2],
    Number(process.argv[3] ?? 5),
    (process.argv[4] ?? Object.keys(VARIANTS).join(',')).split(','),
  );
