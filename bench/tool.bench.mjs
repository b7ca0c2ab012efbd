// One tool call through a tool worker over NATS, next to a raw @nats-io request/reply carrying the same bytes and
// the same tool served by Moleculer over its NATS transporter, without and with its `params` validation (at 1 and
// 64 in flight, each contender in a process of its own with its caller and server); 8 CPU-bound calls on 1 vs 2
// worker processes; and an embedded call next to a plain function, LangChain's tool.invoke and OpenAI Agents'
// invokeFunctionTool on the same tool. Every baseline is measured in the same run.
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { z } from 'zod';
import { MemoryBus, invokeTool, silentLogger } from '@agentmesh/protocol';
import { ToolWorker, mathCalcTool } from '@agentmesh/tool-worker';
import {
  alternated,
  figure,
  forkAsker,
  latencyFigures,
  measure,
  median,
  medianResult,
  pairedRatio,
} from './lib.mjs';

export const title = 'Tools: a call through a worker vs raw NATS, Moleculer, CPU scaling, embedded calls';

const WORKER_FIXTURE = fileURLToPath(new URL('../test/fixtures/worker-process.mjs', import.meta.url));
const CONTENDER = fileURLToPath(new URL('./tool-call-contender.mjs', import.meta.url));
const CPU_CALLER = fileURLToPath(new URL('./cpu-caller.mjs', import.meta.url));
const CPU_TASK = new URL('../test/fixtures/worker-cpu-task.mjs', import.meta.url);
const args = { lhs: 2, rhs: 3, op: 'add' };
const calc = ({ lhs, rhs, op }) => ({
  result: op === 'add' ? lhs + rhs : op === 'sub' ? lhs - rhs : op === 'mul' ? lhs * rhs : lhs / rhs,
});

export async function run({ natsUrl, quick, cores, serverPid }) {
  const figures = [];
  figures.push(...(await overNats(natsUrl, quick, cores, serverPid)));
  figures.push(...(await cpuScaling(natsUrl, quick, serverPid)));
  figures.push(...(await embedded(quick)));
  return figures;
}

/** A contender of the tool-call bench in its own process (see tool-call-contender.mjs). */
async function startContender(kind, { natsUrl, prefix, cores, serverPid }, sample) {
  const args = [kind, natsUrl, prefix, ...(serverPid === undefined ? [] : [String(serverPid)])];
  const child = await forkAsker(CONTENDER, args, {
    label: `the ${kind} contender`,
    cores: cores?.bench,
  });
  const ready = await child.ask({ start: { sample } });
  return {
    sample: ready.sample,
    measure: async (options) => (await child.ask({ measure: options })).result,
    stop: child.stop,
  };
}

async function overNats(natsUrl, quick, cores, serverPid) {
  const prefix = `bench${process.pid}`;
  const figures = [];
  const where = { natsUrl, prefix, cores, serverPid };
  const ours = await startContender('agentmesh', where);
  const raw = await startContender('raw', where, ours.sample);
  const mol = await startContender('moleculer', where);
  const bare = await startContender('floor', where, ours.sample);
  // like for like: Moleculer checking each call against the action's `params`, as a typed tool's arguments are
  const molParams = await startContender('moleculer-params', where);
  // many short blocks of calls, contenders alternated block by block; each figure is the median over blocks, each
  // ratio the median of the ratios of two contenders in the same block (a best-of-3 moved the @1 ratio by 1.5x
  // between runs; a burst of load from another process lasts longer than a block, so it spoils few of them)
  const plans = quick
    ? [
        [1, 400, 5],
        [64, 2000, 5],
      ]
    : [
        [1, 600, 15],
        [64, 2500, 15],
      ];
  try {
    for (const [concurrency, count, blocks] of plans) {
      const at = `@${concurrency} in flight`;
      const order = [raw, mol, ours, bare, molParams];
      // a warm-up pass of every contender first, as the embedded calls have: the first blocks of each ran while V8
      // still optimized its code (agentmesh 1.08-1.27x Moleculer's p50 at 1 in flight in blocks 1-5, 1.04-1.08x in
      // blocks 21-30), so the median leaned on how fast each contender warms up, not on its call
      for (const c of order) await c.measure({ count: count * (quick ? 2 : 5), concurrency });
      const [rawB, molB, oursB, bareB, molPB] = await alternated(
        order.map((c) => () => c.measure({ count, concurrency })),
        blocks,
      );
      const [rawR, molR, oursR, bareR, molPR] = [rawB, molB, oursB, bareB, molPB].map(medianResult);
      figures.push(...latencyFigures(`raw nc.request ${at}`, rawR));
      figures.push(
        ...latencyFigures(`moleculer call ${at}`, molR, `raw nc.request ${at}`, rawR, [molB, rawB]),
      );
      figures.push(
        ...latencyFigures(`agentmesh tool call ${at}`, oursR, `raw nc.request ${at}`, rawR, [oursB, rawB]),
      );
      const vsMoleculer = (what, key, unit) =>
        figure(
          `agentmesh tool call ${at} ${what} vs moleculer`,
          oursR[key],
          unit,
          { name: `moleculer call ${at} ${what}`, value: molR[key] },
          pairedRatio(oursB, molB, key),
        );
      figures.push(vsMoleculer('throughput', 'throughput', 'ops/s'));
      figures.push(vsMoleculer('p50', 'p50_us', 'us'), vsMoleculer('p99', 'p99_us', 'us'));
      const molParamsName = `moleculer call with params validation ${at}`;
      figures.push(...latencyFigures(molParamsName, molPR, `moleculer call ${at}`, molR, [molPB, molB]));
      const vsMoleculerParams = (what, key, unit) =>
        figure(
          `agentmesh tool call ${at} ${what} vs moleculer with params validation`,
          oursR[key],
          unit,
          { name: `${molParamsName} ${what}`, value: molPR[key] },
          pairedRatio(oursB, molPB, key),
        );
      figures.push(
        vsMoleculerParams('throughput', 'throughput', 'ops/s'),
        vsMoleculerParams('p50', 'p50_us', 'us'),
        vsMoleculerParams('p99', 'p99_us', 'us'),
      );
      // the floor beside the target: the bare round trip (publish, one literal reply subscription, no timer), and
      // what each contender adds to it, in us (p50) and in calls a second
      const floorName = `nats round trip floor ${at}`;
      figures.push(...latencyFigures(floorName, bareR));
      const overFloor = (blocksOf, label) =>
        figure(
          `${label} ${at} p50 over the floor`,
          median(blocksOf.map((r, i) => r.p50_us - bareB[i].p50_us)),
          'us',
        );
      figures.push(
        overFloor(oursB, 'agentmesh tool call'),
        overFloor(molB, 'moleculer call'),
        figure(
          `agentmesh tool call ${at} throughput vs the floor`,
          oursR.throughput,
          'ops/s',
          { name: `${floorName} throughput`, value: bareR.throughput },
          pairedRatio(oursB, bareB, 'throughput'),
        ),
        figure(
          `moleculer call ${at} throughput vs the floor`,
          molR.throughput,
          'ops/s',
          { name: `${floorName} throughput`, value: bareR.throughput },
          pairedRatio(molB, bareB, 'throughput'),
        ),
      );
      figures.push(...callCpuFigures(at, oursB, molB));
      if (concurrency > 1) figures.push(...gcFigures(at, oursB, molB));
    }
  } finally {
    await Promise.all([ours, raw, mol, bare, molParams].map((c) => c.stop()));
  }
  return figures;
}

/**
 * The CPU a call, agentmesh's beside Moleculer's: of the contender's process (caller and server together) and of the
 * nats-server (when this bench started it). At 64 in flight a contender that keeps its core busy gets no more calls a
 * second than its CPU a call allows, so the throughput ratio there follows the first.
 */
function callCpuFigures(at, oursB, molB) {
  const perCall = [['CPU a call', 'cpu_us']];
  if (oursB.every((r) => r.server_cpu_us !== undefined))
    perCall.push(['nats-server CPU a call', 'server_cpu_us']);
  return perCall.map(([what, key]) =>
    figure(
      `agentmesh tool call ${at} ${what} vs moleculer`,
      median(oursB.map((r) => r[key])),
      'us',
      { name: `moleculer call ${at} ${what}`, value: median(molB.map((r) => r[key])) },
      pairedRatio(oursB, molB, key),
    ),
  );
}

/** The garbage collector's pauses in a block (median over blocks), agentmesh's beside Moleculer's: what the p99 holds. */
function gcFigures(at, oursB, molB) {
  const perBlock = (blocksOf, key) => median(blocksOf.map((r) => r[key]));
  return [
    ['GC pauses a block', 'gc_pause_ms'],
    ['longest GC pause a block', 'gc_max_pause_ms'],
  ].map(([what, key]) =>
    figure(`agentmesh tool call ${at} ${what}`, perBlock(oursB, key), 'ms', {
      name: `moleculer call ${at} ${what}`,
      value: perBlock(molB, key),
    }),
  );
}

async function spawnWorker(natsUrl, prefix) {
  const child = spawn(
    process.execPath,
    [
      WORKER_FIXTURE,
      '--nats',
      natsUrl,
      '--prefix',
      prefix,
      '--tools',
      'test',
      '--threads',
      '1',
      '--no-register',
    ],
    {
      stdio: ['ignore', 'pipe', 'ignore'],
      env: { ...process.env, LOG_LEVEL: 'error' },
    },
  );
  await new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`bench worker exited with ${code}`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (line.includes('"ready":true')) resolve();
    });
  });
  return child;
}

/** The CPU time (ms) each thread of process `pid` has used, by thread id, from /proc (Linux); undefined elsewhere. */
function threadCpuMs(pid) {
  if (pid === undefined) return undefined;
  try {
    const threads = new Map();
    for (const tid of readdirSync(`/proc/${pid}/task`))
      threads.set(
        tid,
        Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]) / 1e6,
      );
    return threads;
  } catch {
    return undefined;
  }
}

/**
 * The CPU a batch took, read before and after it from /proc: the tool threads of the `workers` processes (in each,
 * the thread other than its main one that used the most), and the rest of the CPU of the caller, of nats-server and
 * of the workers (pids `caller`, `server` and `workers`). Only the elapsed time when /proc or a pid is missing.
 */
async function batchCpu({ caller, server, workers }, run) {
  const pids = [caller, server, ...workers];
  const before = pids.map(threadCpuMs);
  const elapsed = await run();
  const after = pids.map(threadCpuMs);
  if (before.includes(undefined) || after.includes(undefined)) return { elapsed };
  const used = pids.map((pid, i) => {
    const threads = [...after[i]].map(([tid, ms]) => ({ tid, ms: ms - (before[i].get(tid) ?? 0) }));
    const all = threads.reduce((sum, t) => sum + t.ms, 0);
    const tool = i < 2 ? 0 : Math.max(0, ...threads.filter((t) => t.tid !== String(pid)).map((t) => t.ms));
    return { all, tool };
  });
  const workersRest = used.slice(2).reduce((sum, u) => sum + u.all - u.tool, 0);
  return {
    elapsed,
    tool: used.slice(2).reduce((sum, u) => sum + u.tool, 0),
    rest: used[0].all + used[1].all + workersRest,
    parts: { caller: used[0].all, server: used[1].all, workers: workersRest },
  };
}

const BARE_THREAD = `
const { parentPort, workerData } = require('node:worker_threads');
const task = import(workerData.task);
parentPort.on('message', async ({ calls, work }) => {
  const { hashRounds } = await task;
  for (let i = 0; i < calls; i++) hashRounds({ ...work, seed: String(i) });
  parentPort.postMessage(calls);
});`;

/** Two plain worker threads that run the bench's hashing with nothing around it: the machine's own 2-core speedup. */
function bareThreads(work) {
  const threads = [0, 1].map(
    () => new Worker(BARE_THREAD, { eval: true, workerData: { task: CPU_TASK.href } }),
  );
  const run = (thread, calls) =>
    new Promise((resolve) => {
      thread.once('message', resolve);
      thread.postMessage({ calls, work });
    });
  return {
    one: () => run(threads[0], 8),
    two: () => Promise.all([run(threads[0], 4), run(threads[1], 4)]),
    stop: () => Promise.all(threads.map((t) => t.terminate())),
  };
}

/**
 * 8 CPU-bound calls on 1 worker process, on 2 (the queue group and the workers' busy answers spread them), split
 * 4 + 4 by the caller over 2 (the ceiling of any dispatch), and the same hashing on 2 bare threads against 1 (the
 * machine's floor). The fleets stay up; each round runs every contender once, each round starting with the next one,
 * and each ratio is the median of the ratios of two contenders in the same round: load from other processes that
 * lasts a few seconds spoils a few rounds, not a figure (best of 6 batches moved the speedup 1.87-1.93x between
 * quiet runs). With /proc, the CPU of every process in a 2-process batch gives the speedup's ceiling: on 2 cores
 * that both hash, the CPU spent outside the tool threads (caller, nats-server, the workers' event loops) comes out
 * of the hashing's time. The caller is a process of its own (see {@link startCaller}).
 */
export async function cpuScaling(natsUrl, quick, serverPid) {
  const work = { rounds: quick ? 60 : 150, bytes: 1024 * 1024 };
  const caller = await startCaller(natsUrl, work.rounds);
  const sendsOfTwo = [];
  const busiestOfTwo = [];
  const batch = (prefix) => caller.ask({ batch: { prefix } });
  const counted = async (prefix) => {
    const { elapsed, sends, busiest } = await batch(prefix);
    sendsOfTwo.push(sends);
    busiestOfTwo.push(busiest);
    return elapsed;
  };
  const fleets = [];
  const bare = bareThreads(work);
  let rounds;
  try {
    for (const [name, workers] of [
      ['w1', 1],
      ['w2', 2],
      ['w1b', 1],
    ]) {
      const prefix = `cpu${process.pid}${name}`;
      const children = await Promise.all(Array.from({ length: workers }, () => spawnWorker(natsUrl, prefix)));
      fleets.push({ prefix, children });
    }
    const pids = (fleet) => ({
      caller: caller.pid,
      server: serverPid,
      workers: fleet.children.map((c) => c.pid),
    });
    const timed = async (run) => {
      const t0 = performance.now();
      await run();
      return performance.now() - t0;
    };
    const contenders = [
      () => batchCpu(pids(fleets[0]), async () => (await batch(fleets[0].prefix)).elapsed),
      () => batchCpu(pids(fleets[1]), () => counted(fleets[1].prefix)),
      () => caller.ask({ split: { prefixes: [fleets[0].prefix, fleets[2].prefix] } }),
      () => timed(bare.one).then((elapsed) => ({ elapsed })),
      () => timed(bare.two).then((elapsed) => ({ elapsed })),
    ];
    await alternated(contenders, 1);
    sendsOfTwo.length = 0;
    busiestOfTwo.length = 0;
    rounds = await alternated(contenders, quick ? 5 : 11);
  } finally {
    const exited = fleets.flatMap((fleet) =>
      fleet.children.map((c) => (c.exitCode !== null ? undefined : new Promise((r) => c.once('exit', r)))),
    );
    for (const fleet of fleets) for (const c of fleet.children) c.kill('SIGTERM');
    // the next figures (embedded calls) are measured only once these processes are gone
    await Promise.all([...exited, bare.stop(), caller.stop()]);
  }
  return cpuFigures(rounds, sendsOfTwo, busiestOfTwo);
}

/**
 * The caller of the CPU-bound calls in a process of its own (`cpu-caller.mjs`), as each tool-call contender has
 * one: what a batch costs its caller is the caller's, not also the collection of what this process kept from the
 * sections before. `ask` sends it a command and resolves with its result.
 */
async function startCaller(natsUrl, rounds) {
  const child = await forkAsker(CPU_CALLER, [natsUrl, String(rounds)], {
    label: "the CPU-bound calls' caller",
  });
  return { pid: child.pid, ask: async (command) => (await child.ask(command)).result, stop: child.stop };
}

/** The value at quantile `q` of `values`. */
function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.round(q * (sorted.length - 1)))];
}

function cpuFigures([one, two, even, bareOne, bareTwo], sendsOfTwo, busiestOfTwo) {
  const ms = (r) => r.elapsed;
  const speedups = one.map((r, i) => r.elapsed / two[i].elapsed);
  const base = figure('8 CPU-bound calls, 1 worker process', median(one.map(ms)), 'ms');
  const figures = [
    base,
    figure(
      '8 CPU-bound calls, 2 worker processes',
      median(two.map(ms)),
      'ms',
      base,
      pairedRatio(two, one, ms),
    ),
    figure('speedup of 2 worker processes over 1', median(speedups), 'x'),
    figure('speedup of 2 worker processes over 1: 25th percentile of rounds', quantile(speedups, 0.25), 'x'),
    figure('speedup of 2 worker processes over 1: 75th percentile of rounds', quantile(speedups, 0.75), 'x'),
    figure(
      '8 CPU-bound calls split 4 + 4 by the caller over 2 worker processes (dispatch ceiling)',
      median(even.map(ms)),
      'ms',
      base,
      pairedRatio(even, one, ms),
    ),
    figure('speedup of the even split over 1 worker process', pairedRatio(one, even, ms), 'x'),
    figure(
      'speedup of bare threads, 2 over 1, on the same hashing (machine floor)',
      pairedRatio(bareOne, bareTwo, ms),
      'x',
    ),
    // the even split sends 8 and serves 4 on each worker
    figure('2 worker processes: sends per batch of 8 CPU-bound calls (median)', median(sendsOfTwo), 'sends'),
    figure(
      '2 worker processes: calls on the busier worker (most in any batch)',
      Math.max(...busiestOfTwo),
      'calls',
    ),
  ];
  if (two.every((r) => r.rest !== undefined) && one.every((r) => r.tool !== undefined))
    figures.push(
      figure(
        '2 worker processes: CPU outside the tool threads per batch (caller, nats-server, event loops)',
        median(two.map((r) => r.rest)),
        'ms',
      ),
      ...[
        ['caller', 'the caller'],
        ['server', 'nats-server'],
        ['workers', "the workers' event loops and helper threads"],
      ].map(([part, who]) =>
        figure(`2 worker processes: CPU of ${who} per batch`, median(two.map((r) => r.parts[part])), 'ms'),
      ),
      figure('2 worker processes: tool-thread CPU per batch', median(two.map((r) => r.tool)), 'ms', {
        name: '1 worker process: tool-thread CPU per batch',
        value: median(one.map((r) => r.tool)),
      }),
      // a batch on 2 cores takes at least half of all the CPU it uses, a batch on 1 process at least its tool
      // thread's: CPU time, which load from other processes moves far less than wall time, bounds the speedup
      figure(
        'speedup bound from CPU time (1 process: its tool thread; 2 processes: half of all their CPU)',
        median(one.map((r, i) => r.tool / ((two[i].tool + two[i].rest) / 2))),
        'x',
      ),
    );
  return figures;
}

/**
 * The embedded calls, each contender in blocks alternated with the others (11 blocks, each after a warm-up pass of
 * all of them): each figure is the median of its blocks' p50s, each ratio the median of the ratios of two contenders
 * in the same block. Measured one after the other, the MemoryBus call moved from 0.44x to 1.79x OpenAI Agents
 * between runs, with whichever of the two the garbage collector or another process hit.
 */
export async function embedded(quick) {
  const scale = quick ? 0.25 : 1;
  const blocks = quick ? 5 : 11;
  const figures = [];
  const plain = async (a) => calc(a);
  const ours = mathCalcTool();
  const bus = new MemoryBus();
  const worker = new ToolWorker({ bus, tools: [mathCalcTool()], logger: silentLogger(), register: false });
  await worker.start();
  let seq = 0;
  const contenders = [
    { key: 'plain', count: 20000, call: () => plain(args) },
    { key: 'invoke', count: 20000, call: () => ours.invoke(args) },
    {
      key: 'execute',
      count: 20000,
      call: () => worker.execute({ call_id: `e-${++seq}`, run_id: 'r', tool: 'math.calc', arguments: args }),
    },
    {
      key: 'memory',
      count: 10000,
      call: () => invokeTool(bus, { call_id: `m-${++seq}`, run_id: 'r', tool: 'math.calc', arguments: args }),
    },
  ];
  const schema = z.object({ lhs: z.number(), rhs: z.number(), op: z.enum(['add', 'sub', 'mul', 'div']) });
  const missing = [];
  try {
    const { tool } = await import('@langchain/core/tools');
    const lc = tool(async (a) => JSON.stringify(calc(a)), {
      name: 'math_calc',
      description: 'Computes lhs op rhs.',
      schema,
    });
    contenders.push({ key: 'langchain', count: 2000, call: () => lc.invoke(args) });
  } catch (error) {
    missing.push({ name: `LangChain tool.invoke not measured: ${error.message}`, value: 0, unit: 'n/a' });
  }
  try {
    const { tool, invokeFunctionTool, RunContext } = await import('@openai/agents-core');
    const oa = tool({
      name: 'math_calc',
      description: 'Computes lhs op rhs.',
      parameters: schema,
      execute: async (a) => calc(a),
    });
    const runContext = new RunContext({});
    const input = JSON.stringify(args);
    contenders.push({
      key: 'openai',
      count: 10000,
      call: () => invokeFunctionTool({ tool: oa, runContext, input }),
    });
  } catch (error) {
    missing.push({
      name: `OpenAI Agents invokeFunctionTool not measured: ${error.message}`,
      value: 0,
      unit: 'n/a',
    });
  }
  const sized = contenders.map((c) => ({ ...c, count: Math.round(c.count * scale) }));
  // the warm-up pass: as many calls of each as a block measures, so the blocks see the steady state
  for (const c of sized) await measure(c.call, { count: c.count, warmup: c.count });
  const byBlock = await alternated(
    sized.map((c) => () => measure(c.call, { count: c.count, warmup: Math.min(1000, c.count) })),
    blocks,
  );
  await worker.drain();
  const blocksOf = Object.fromEntries(sized.map((c, i) => [c.key, byBlock[i]]));
  const p50 = (key) => median(blocksOf[key].map((r) => r.p50_us));
  const vs = (name, key, baseKey, baseName) =>
    figure(
      name,
      p50(key),
      'us',
      { name: baseName, value: p50(baseKey) },
      pairedRatio(blocksOf[key], blocksOf[baseKey], 'p50_us'),
    );
  const plainName = 'plain function call p50';
  figures.push(figure(plainName, p50('plain'), 'us'));
  figures.push(vs('agentmesh tool.invoke (embedded) p50', 'invoke', 'plain', plainName));
  figures.push(vs('agentmesh worker.execute (full pipeline, embedded) p50', 'execute', 'plain', plainName));
  figures.push(vs('agentmesh invokeTool over MemoryBus p50', 'memory', 'plain', plainName));
  if (blocksOf.langchain) {
    const lcName = 'LangChain tool.invoke p50';
    figures.push(vs(lcName, 'langchain', 'plain', plainName));
    figures.push(vs('agentmesh tool.invoke p50 vs LangChain', 'invoke', 'langchain', lcName));
  }
  if (blocksOf.openai) {
    const oaName = 'OpenAI Agents invokeFunctionTool p50';
    figures.push(vs(oaName, 'openai', 'plain', plainName));
    figures.push(vs('agentmesh tool.invoke p50 vs OpenAI Agents', 'invoke', 'openai', oaName));
    figures.push(vs('agentmesh invokeTool over MemoryBus p50 vs OpenAI Agents', 'memory', 'openai', oaName));
  }
  figures.push(...missing);
  return figures;
}
