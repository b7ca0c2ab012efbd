// The planner: loop overhead per turn with a zero-latency scripted provider (embedded), next to OpenAI Agents' Runner
// with a zero-latency model (bench/package.json), submit -> run.accepted over
// NATS, and 1,000 concurrent runs in one planner against a provider that answers after 50 ms. Baselines in the same
// run: a bare tool call on the same bus, a raw NATS request/reply, and the ideal time of the model latency alone.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { RetentionPolicy, StorageType, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { invokeTool } from '@agentmesh/protocol';
import { bareAcceptChain } from './accept-floor.mjs';
import { acceptRig } from './accept-rig.mjs';
import { add, concurrentRounds, embeddedMesh } from './embedded-mesh.mjs';
import { alternated, figure, latencyFigures, measure, median, pairedRatio } from './lib.mjs';

/** The `q` quantile of sorted samples. */
const pick = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))];

export const title = 'Planner: loop overhead per turn, submit to run.accepted, 1,000 concurrent runs';

export async function run({ natsUrl, quick }) {
  const figures = [];
  const loop = await loopOverhead(quick);
  figures.push(...loop);
  figures.push(...(await runnerBaseline(quick, loop)));
  figures.push(...(await submitToAccepted(natsUrl, quick)));
  figures.push(...(await concurrentRuns(quick)));
  return figures;
}

/**
 * The median of 7 blocks of runs: one block right after the warm-up lands wherever the JIT and the garbage collector
 * happen to be (block means of either contender move by up to 3x between blocks), so both loops take the median.
 */
async function medianOfBlocks(block) {
  const means = [];
  for (let i = 0; i < 7; i++) means.push(await block());
  return means.sort((a, b) => a - b)[3];
}

async function loopOverhead(quick) {
  // a run's limits are capped by the planner's: this planner allows the 100 iterations its runs ask for
  const mesh = await embeddedMesh({ transcripts: true, defaults: { limits: { max_iterations: 100 } } });
  const turns = 50;
  const runs = 40;
  const toolTurns = Array.from({ length: turns - 1 }, () => ({ tool_calls: [add] }));
  const textTurns = Array.from({ length: turns - 1 }, () => ({
    text: 'thinking',
    tool_calls: [{ name: 'math.calc', arguments: '{' }],
  }));
  let n = 0;
  const timeRuns = async (script) => {
    const t0 = performance.now();
    for (let i = 0; i < runs; i++) {
      const final = await mesh.planner.execute({
        id: `ov-${++n}`,
        task: 'bench',
        script,
        tool_search: 'off',
        limits: { max_iterations: 100 },
      });
      if (final.type !== 'run.completed' || final.status !== 'done')
        throw new Error(`bench run ended ${JSON.stringify(final)}`);
    }
    return (performance.now() - t0) / runs;
  };
  // warm up
  await timeRuns([...toolTurns.slice(0, 5), { text: 'ok' }]);
  const oneTurnMs = await medianOfBlocks(() => timeRuns([{ text: 'ok' }]));
  const toolRunMs = await timeRuns([...toolTurns, { text: 'ok' }]);
  const refusedRunMs = await timeRuns([...textTurns, { text: 'ok' }]);
  const perToolTurnUs = ((toolRunMs - oneTurnMs) / (turns - 1)) * 1000;
  const perTurnNoToolUs = ((refusedRunMs - oneTurnMs) / (turns - 1)) * 1000;
  let seq = 0;
  const bare = await measure(
    () =>
      invokeTool(mesh.bus, {
        call_id: `b-${++seq}`,
        run_id: 'bench',
        tool: 'math.calc',
        arguments: add.arguments,
      }),
    { count: quick ? 500 : 3000 },
  );
  await mesh.stop();
  const toolFig = figure('tool call alone (embedded, same worker)', bare.p50_us, 'us');
  const turnFig = figure('planner turn with 1 tool call (embedded)', perToolTurnUs, 'us', toolFig);
  return [
    toolFig,
    turnFig,
    figure('planner overhead per turn beyond tool time', perToolTurnUs - bare.p50_us, 'us'),
    figure('planner turn without execution (fail-closed call)', perTurnNoToolUs, 'us'),
    figure('run setup + teardown (1 text turn, transcript saved)', oneTurnMs * 1000, 'us'),
  ];
}

/** A model for the OpenAI Agents Runner that answers at once: `toolTurns` turns with one math_calc call, then 'ok'. */
class ScriptedAgentsModel {
  constructor(Usage, toolTurns) {
    this.Usage = Usage;
    this.left = toolTurns;
    this.calls = 0;
  }
  async getResponse() {
    const usage = new this.Usage();
    if (this.left-- > 0)
      return {
        usage,
        output: [
          {
            type: 'function_call',
            callId: `call-${++this.calls}`,
            name: 'math_calc',
            arguments: JSON.stringify(add.arguments),
            status: 'completed',
          },
        ],
      };
    return {
      usage,
      output: [
        {
          type: 'message',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: 'ok' }],
        },
      ],
    };
  }
  async *getStreamedResponse() {
    throw new Error('the bench model does not stream');
  }
}

/**
 * The agent loop's closest peer: OpenAI Agents' Runner with a zero-latency model and the same tool, measured the way
 * loopOverhead measures the planner (runs of 1 text turn, runs of 49 tool turns + 1 text turn).
 */
async function runnerBaseline(quick, ours) {
  let agents;
  try {
    agents = await import('@openai/agents-core');
  } catch (error) {
    return [{ name: `OpenAI Agents Runner not measured: ${error.message}`, value: 0, unit: 'n/a' }];
  }
  const { Agent, Runner, Usage, tool, setTracingDisabled } = agents;
  setTracingDisabled(true);
  const mathTool = tool({
    name: 'math_calc',
    description: 'Computes lhs op rhs.',
    parameters: {
      type: 'object',
      properties: {
        lhs: { type: 'number' },
        rhs: { type: 'number' },
        op: { type: 'string', enum: ['add', 'sub', 'mul', 'div'] },
      },
      required: ['lhs', 'rhs', 'op'],
      additionalProperties: false,
    },
    strict: true,
    execute: async ({ lhs, rhs, op }) => ({
      value: op === 'add' ? lhs + rhs : op === 'sub' ? lhs - rhs : op === 'mul' ? lhs * rhs : lhs / rhs,
    }),
  });
  const runner = new Runner({ tracingDisabled: true });
  const turns = 50;
  const runs = 40;
  const timeRuns = async (toolTurns) => {
    const t0 = performance.now();
    for (let i = 0; i < runs; i++) {
      const model = new ScriptedAgentsModel(Usage, toolTurns);
      const agent = new Agent({ name: 'bench', instructions: 'bench', model, tools: [mathTool] });
      const result = await runner.run(agent, 'bench', { maxTurns: turns + 10 });
      if (result.finalOutput !== 'ok') throw new Error(`Runner run ended with ${result.finalOutput}`);
    }
    return (performance.now() - t0) / runs;
  };
  await timeRuns(5);
  const oneTurnMs = await medianOfBlocks(() => timeRuns(0));
  const toolRunMs = await timeRuns(turns - 1);
  const perToolTurnUs = ((toolRunMs - oneTurnMs) / (turns - 1)) * 1000;
  const runnerTurn = figure('OpenAI Agents Runner turn with 1 tool call', perToolTurnUs, 'us');
  const runnerRun = figure('OpenAI Agents Runner run of 1 text turn', oneTurnMs * 1000, 'us');
  const value = (name) => ours.find((f) => f.name === name)?.value;
  return [
    runnerTurn,
    runnerRun,
    figure(
      'planner turn with 1 tool call vs OpenAI Agents Runner',
      value('planner turn with 1 tool call (embedded)'),
      'us',
      runnerTurn,
    ),
    figure(
      'run of 1 text turn (transcript saved) vs OpenAI Agents Runner',
      value('run setup + teardown (1 text turn, transcript saved)'),
      'us',
      runnerRun,
    ),
  ];
}

async function submitToAccepted(natsUrl, quick) {
  const prefix = `bplanner${process.pid}`;
  const rig = await acceptRig(natsUrl, prefix, 'bench-planner-nats');
  const { nc } = rig;
  const echo = nc.subscribe(`${prefix}.echo`, { callback: (_e, m) => m.respond(m.data) });
  await nc.flush();
  const payload = JSON.stringify({ task: 'bench', script: [{ text: 'ok' }] });
  const baseline = await measure(() => nc.request(`${prefix}.echo`, payload), { count: quick ? 200 : 1000 });
  const pubAck = await rawJetStreamPublish(nc, prefix, payload, quick);
  const floorChain = await bareAcceptChain(natsUrl, prefix, payload);
  const tailChain = await bareAcceptChain(natsUrl, prefix, payload, { tail: true });
  let n = 0;
  const one = () => rig.submitOne(`sub-${++n}`);
  const timedAccepted = () => rig.submitOne(`acc-${++n}`);
  const ourBlock = async (size) => {
    const out = [];
    for (let i = 0; i < size; i++) out.push(await timedAccepted());
    return out.sort((a, b) => a - b);
  };
  for (let i = 0; i < 20; i++) await one();
  // blocks of the planner's submits alternated with blocks of the bare chain's, each figure the median of its
  // blocks' p50s and the ratio the median of the two in the same block (measured one after the other, a load burst
  // on either moved the ratio)
  const blocks = quick ? 3 : 11;
  const size = quick ? 50 : 100;
  await floorChain.measure({ count: size, warmup: 50 });
  await tailChain.measure({ count: size, warmup: 50 });
  const [ourBlocks, floorBlocks, tailBlocks] = await alternated(
    [
      () => withCpu(size, async () => ({ p50_us: pick(await ourBlock(size), 0.5) })),
      () => withCpu(size + 10, () => floorChain.measure({ count: size, warmup: 10 })),
      () => withCpu(size + 10, () => tailChain.measure({ count: size, warmup: 10 })),
    ],
    blocks,
  );
  await floorChain.stop();
  await tailChain.stop();
  const acceptedP50 = median(ourBlocks.map((b) => b.p50_us));
  const floorP50 = median(floorBlocks.map((b) => b.p50_us));
  const acceptedVsFloor = pairedRatio(ourBlocks, floorBlocks, 'p50_us');
  // the bare chain that also ends each run as a durable run ends: after its event the record says finished (a
  // compare-and-set), then the request is acked with a confirmation. The submitter sends its next request on hearing
  // the event, so that end overlaps the next submit, as the end of each of the planner's runs does.
  const tailFloor = figure(
    "submit -> run.accepted floor with the previous run's end: bare nats.js chain p50",
    median(tailBlocks.map((b) => b.p50_us)),
    'us',
  );
  const floorCpu = figure(
    'submit -> run.accepted floor: CPU per submit (bare nats.js chain)',
    median(floorBlocks.map((b) => b.cpu_us)),
    'us',
  );
  const p99Samples = await ourBlock(quick ? 50 : 200);
  echo.unsubscribe();
  await rig.drain();
  const apart = await inOwnProcess(natsUrl, prefix, async () => {
    for (let i = 0; i < 20; i++) await one();
    return ourBlock(quick ? 50 : 200);
  });
  await rig.stop();
  const raw = figure('raw NATS request/reply p50', baseline.p50_us, 'us');
  const floorFigure = figure('submit -> run.accepted floor: bare nats.js chain p50', floorP50, 'us', raw);
  return [
    raw,
    figure('submit -> run.accepted p50 (NATS, JetStream intake)', acceptedP50, 'us', raw),
    figure('submit -> run.accepted p99', pick(p99Samples, 0.99), 'us'),
    pubAck,
    figure('submit -> run.accepted p50 vs raw JetStream publish', acceptedP50, 'us', pubAck),
    figure(
      'submit -> run.accepted p50, planner in its own process',
      apart[Math.floor(apart.length / 2)],
      'us',
      raw,
    ),
    figure(
      'submit -> run.accepted p50, planner in its own process, vs raw JetStream publish',
      apart[Math.floor(apart.length / 2)],
      'us',
      pubAck,
    ),
    floorFigure,
    figure(
      'submit -> run.accepted p50 vs its bare nats.js floor',
      acceptedP50,
      'us',
      floorFigure,
      acceptedVsFloor,
    ),
    tailFloor,
    figure(
      "submit -> run.accepted p50 vs its floor with the previous run's end",
      acceptedP50,
      'us',
      tailFloor,
      pairedRatio(ourBlocks, tailBlocks, 'p50_us'),
    ),
    floorCpu,
    figure(
      'submit -> run.accepted CPU per submit (submitter, planner and its 1-turn run) vs its bare nats.js floor',
      median(ourBlocks.map((b) => b.cpu_us)),
      'us',
      floorCpu,
      pairedRatio(ourBlocks, floorBlocks, 'cpu_us'),
    ),
  ];
}

/**
 * Runs `block` and adds the CPU time this process spent on it, per operation (`count` operations), as `cpu_us`: the
 * submitter, the planner and its runs, or the bare chain's submitter and taker, all share this process.
 */
async function withCpu(count, block) {
  const before = process.cpuUsage();
  const result = await block();
  const used = process.cpuUsage(before);
  return { ...result, cpu_us: (used.user + used.system) / count };
}

/**
 * Runs `measure` while a planner in a child process (bench/accept-planner.mjs) takes the runs, as in a deployment
 * where submitter and planner do not share one event loop.
 */
async function inOwnProcess(natsUrl, prefix, measure) {
  const child = spawn(
    process.execPath,
    [fileURLToPath(new URL('./accept-planner.mjs', import.meta.url)), natsUrl, prefix, 'bench-planner-apart'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    await new Promise((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d) => {
        out += d.toString();
        if (out.includes('"ready":true')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`accept planner exited with ${code}`)));
    });
    return await measure();
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

/**
 * The floor of a durable intake: one JetStream publish of the same request, with a message id, to a file-backed
 * work-queue stream like the runs intake, awaiting its PubAck. A run is accepted only after this write (the
 * request survives a crash) and two more in turn (its run record: the run-once dedupe and its lease; then the
 * run.accepted event itself): accept-floor.mjs measures that whole chain with bare nats.js.
 */
async function rawJetStreamPublish(nc, prefix, payload, quick) {
  const stream = `${prefix}_RAWPUB`;
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({
    name: stream,
    subjects: [`${prefix}.rawpub`],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
  });
  try {
    const js = jetstream(nc);
    let n = 0;
    const r = await measure(() => js.publish(`${prefix}.rawpub`, payload, { msgID: `raw-${++n}` }), {
      count: quick ? 200 : 1000,
    });
    return figure('raw JetStream publish (PubAck) p50', r.p50_us, 'us');
  } finally {
    await jsm.streams.delete(stream).catch(() => undefined);
  }
}

/**
 * `count` runs at once, each two model turns of 50 ms with a tool call between them, in one embedded planner. The
 * first round after start pays for JIT warm-up and is its own figure; the main figure is the median of the rounds
 * after two more warm-up rounds, as a planner that has been up for a while runs them. Memory is sampled during the
 * first round. The same rounds run once more in a process of their own (concurrent-planner.mjs), as a planner
 * process runs them, without the heap and the compiled code of everything this bench process measured before.
 */
async function concurrentRuns(quick) {
  const count = quick ? 300 : 1000;
  const latency = 50;
  const { first, warmed, heapGrowth, rssGrowth } = await concurrentRounds(count, latency);
  const apart = await inChildProcess('concurrent-planner.mjs', [String(count), String(latency)]);
  const ideal = figure('ideal: 2 model turns x 50 ms', 2 * latency, 'ms');
  return [
    ideal,
    figure(`${count} concurrent runs in one planner, time to finish all`, median(warmed), 'ms', ideal),
    figure(`${count} concurrent runs, first round after start (cold JIT)`, first, 'ms', ideal),
    figure(`${count} concurrent runs: peak heap growth`, heapGrowth / 1048576, 'MB'),
    figure(`${count} concurrent runs: peak RSS growth`, rssGrowth / 1048576, 'MB'),
    figure(`${count} concurrent runs: heap per run`, heapGrowth / count / 1024, 'KB'),
    figure(`${count} concurrent runs, planner in a process of its own`, median(apart.warmed), 'ms', ideal),
    figure(
      `${count} concurrent runs, planner in a process of its own: CPU per run`,
      median(apart.cpuPerRun),
      'us',
    ),
  ];
}

/** Runs a bench script in a child process and returns the JSON object it prints last. */
async function inChildProcess(script, args) {
  const child = spawn(process.execPath, [fileURLToPath(new URL(`./${script}`, import.meta.url)), ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d.toString()));
  const code = await new Promise((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`${script} exited with ${code}`);
  return JSON.parse(out.trim().split('\n').pop());
}
