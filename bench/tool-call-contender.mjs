// One contender of the tool-call bench in a process of its own: it serves math.calc and calls it one way (`raw`
// @nats-io request/reply, `floor` the bare round trip under all of them, `moleculer` over its NATS transporter,
// `moleculer-params` the same with the action's `params` checked on every call, or `agentmesh` through a tool
// worker), caller and server in this one process, and measures when the parent asks. A process per contender keeps
// the JIT and garbage collector state one of them leaves behind from slowing down the next (the raw baseline and
// agentmesh share nats-core's code, Moleculer brings its own client).
// argv: KIND NATS_URL PREFIX [SERVER_PID] (with the nats-server's pid its CPU a call is measured too);
// IPC in: {measure: {count, concurrency}} | {stop: true}; IPC out: {ready, sample?} | {result}.
import { connect } from '@nats-io/transport-node';
import { NatsBus, invokeTool } from '@agentmesh/protocol';
import { PerformanceObserver } from 'node:perf_hooks';
import { mathCalcInvocations, measure, processCpuUs, startMathWorker } from './lib.mjs';

const [kind, natsUrl, prefix, serverPidArg] = process.argv.slice(2);
const serverPid = serverPidArg === undefined ? undefined : Number(serverPidArg);
const args = { lhs: 2, rhs: 3, op: 'add' };
const calc = ({ lhs, rhs, op }) => ({
  result: op === 'add' ? lhs + rhs : op === 'sub' ? lhs - rhs : op === 'mul' ? lhs * rhs : lhs / rhs,
});

const invocation = mathCalcInvocations(args);

async function agentmesh() {
  const workerBus = await NatsBus.connect(natsUrl);
  const clientBus = await NatsBus.connect(natsUrl);
  const worker = await startMathWorker(workerBus, prefix);
  const outcome = await invokeTool(clientBus, invocation(), { prefix });
  // what invokeTool sends: the default identity and the first attempt are left for the worker to fill in
  const sent = invocation();
  const request = JSON.stringify({
    ...sent,
    idempotency_key: `${sent.run_id}:${sent.call_id}`,
    progress_subject: '_INBOX.abcdefghijklmnopqrstuv.1',
  });
  return {
    call: () => invokeTool(clientBus, invocation(), { prefix }),
    sample: { request, reply: JSON.stringify(outcome) },
    stop: async () => {
      await worker.drain();
      await workerBus.close();
      await clientBus.close();
    },
  };
}

async function raw(sample) {
  const requestBytes = new TextEncoder().encode(sample.request);
  const replyBytes = new TextEncoder().encode(sample.reply);
  const client = await connect({ servers: natsUrl, noAsyncTraces: true });
  const responder = await connect({ servers: natsUrl, noAsyncTraces: true });
  responder.subscribe(`${prefix}.raw`, { callback: (_e, m) => m.respond(replyBytes) });
  await responder.flush();
  return {
    call: () => client.request(`${prefix}.raw`, requestBytes, { timeout: 5000 }),
    stop: async () => {
      await client.close();
      await responder.close();
    },
  };
}

/**
 * The round trip under every contender, what Moleculer's transporter does with none of its broker: a publish to the
 * server's subject, the answer published to one literal reply subject the caller subscribes to once, the pending
 * calls in a Map by an id that travels in the body's first 8 bytes (Moleculer's travels in its JSON), and no timer.
 * Same bytes as `raw`. No request/reply client can answer in less without writing the protocol by hand.
 */
async function floor(sample) {
  const requestBytes = new TextEncoder().encode(sample.request);
  const replyBytes = new TextEncoder().encode(sample.reply);
  const client = await connect({ servers: natsUrl, noAsyncTraces: true });
  const responder = await connect({ servers: natsUrl, noAsyncTraces: true });
  const inbox = `_INBOX.${prefix}.floor`;
  responder.subscribe(`${prefix}.floor`, {
    callback: (_e, m) => {
      const out = new Uint8Array(8 + replyBytes.length);
      out.set(m.data.subarray(0, 8), 0);
      out.set(replyBytes, 8);
      responder.publish(m.reply, out);
    },
  });
  const pending = new Map();
  client.subscribe(inbox, {
    callback: (_e, m) => {
      const id = Buffer.from(m.data.buffer, m.data.byteOffset, 8).toString('latin1');
      const resolve = pending.get(id);
      if (resolve === undefined) return;
      pending.delete(id);
      resolve(m);
    },
  });
  await responder.flush();
  await client.flush();
  let next = 0;
  return {
    call: () =>
      new Promise((resolve) => {
        const id = (++next).toString(36).padStart(8, '0');
        pending.set(id, resolve);
        const body = Buffer.allocUnsafe(8 + requestBytes.length);
        body.write(id, 0, 'latin1');
        body.set(requestBytes, 8);
        client.publish(`${prefix}.floor`, body, { reply: inbox });
      }),
    stop: async () => {
      await client.close();
      await responder.close();
    },
  };
}

/** math.calc's parameters in Moleculer's own schema language (its built-in fastest-validator checks every call). */
const CALC_PARAMS = {
  lhs: 'number',
  rhs: 'number',
  op: { type: 'enum', values: ['add', 'sub', 'mul', 'div'] },
};

/**
 * Moleculer serving math.calc over its NATS transporter. `withParams` (the `moleculer-params` contender) declares the
 * action's `params`, so that every call is checked against them as agentmesh checks a typed tool's arguments.
 */
async function moleculer(withParams = false) {
  const { ServiceBroker } = (await import('moleculer')).default;
  // a namespace of its own: the two Moleculer contenders must not see (and balance over) each other's nodes
  const namespace = withParams ? `${prefix}-params` : prefix;
  const broker = (nodeID) => new ServiceBroker({ namespace, nodeID, transporter: natsUrl, logger: false });
  const server = broker('mol-server');
  const handler = (ctx) => calc(ctx.params);
  server.createService({
    name: 'math',
    actions: { calc: withParams ? { params: CALC_PARAMS, handler } : handler },
  });
  const client = broker('mol-client');
  await server.start();
  await client.start();
  await client.waitForServices(['math'], 10_000);
  return {
    call: () => client.call('math.calc', args),
    stop: async () => {
      await client.stop();
      await server.stop();
    },
  };
}

/**
 * `measure`, with the garbage collector's pauses during it (their sum and the longest, in ms) and the CPU a call of
 * this process and of the nats-server (us), both without the warm-up calls at 1 in flight that come first.
 */
async function measuredWithGc(options) {
  const warmup = options.warmup ?? Math.min(200, options.count);
  for (let i = 0; i < warmup; i++) await contender.call(i);
  let pauseMs = 0;
  let maxPauseMs = 0;
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      pauseMs += entry.duration;
      maxPauseMs = Math.max(maxPauseMs, entry.duration);
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  try {
    const cpuBefore = process.cpuUsage();
    const serverBefore = processCpuUs(serverPid);
    const result = await measure(contender.call, { ...options, warmup: 0 });
    const cpu = process.cpuUsage(cpuBefore);
    const serverAfter = processCpuUs(serverPid);
    // the observer hears of a pause after it: one turn of the event loop later
    await new Promise((resolve) => setImmediate(resolve));
    return {
      ...result,
      gc_pause_ms: pauseMs,
      gc_max_pause_ms: maxPauseMs,
      cpu_us: (cpu.user + cpu.system) / options.count,
      ...(serverBefore === undefined ? {} : { server_cpu_us: (serverAfter - serverBefore) / options.count }),
    };
  } finally {
    observer.disconnect();
  }
}

const contenders = {
  agentmesh,
  raw,
  floor,
  moleculer: () => moleculer(),
  'moleculer-params': () => moleculer(true),
};
let contender;
process.on('message', (msg) => {
  void (async () => {
    if (msg.start) {
      contender = await contenders[kind](msg.start.sample);
      process.send({ ready: true, ...(contender.sample ? { sample: contender.sample } : {}) });
    } else if (msg.measure) {
      process.send({ result: await measuredWithGc(msg.measure) });
    } else if (msg.stop) {
      await contender?.stop();
      process.disconnect();
    }
  })().catch((error) => {
    process.send({ error: String(error?.stack ?? error) });
  });
});
process.send({ up: true });
