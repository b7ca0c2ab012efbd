// The caller of the bench's CPU-bound calls (tool.bench.mjs, `cpuScaling`) in a process of its own, as each
// tool-call contender has its own: the CPU a batch costs its caller is then the caller's, not also the collection of
// whatever the bench process kept from the sections before it.
// argv: NATS_URL ROUNDS (of hashing a call); IPC in: {batch: {prefix}} (8 calls at once to a fleet) | {split: {prefixes}} (4 + 4, 2 in flight
// on each fleet) | {stop: true}; IPC out: {ready} | {result: {elapsed, sends?, busiest?}} | {error}.
import { performance } from 'node:perf_hooks';
import { NatsBus, invokeTool } from '@agentmesh/protocol';

const [natsUrl, rounds] = process.argv.slice(2);
const bus = await NatsBus.connect(natsUrl);
const work = { rounds: Number(rounds), bytes: 1024 * 1024 };
let seq = 0;
// what spreads the calls over 2 workers costs, counted per batch: sends to the queue group and to a worker's own
// subject (after a capacity notice), and the calls each worker served
const spread = { sends: 0, perWorker: new Map() };
const request = bus.request.bind(bus);
bus.request = (subject, data, options) => {
  if (subject.includes('.tool.invoke.')) spread.sends++;
  return request(subject, data, options);
};
// invokeTool sends with requestCallback where the bus has it
const requestCallback = bus.requestCallback?.bind(bus);
if (requestCallback !== undefined)
  bus.requestCallback = (subject, data, options, settled) => {
    if (subject.includes('.tool.invoke.')) spread.sends++;
    requestCallback(subject, data, options, settled);
  };

const call = (prefix) =>
  invokeTool(
    bus,
    {
      call_id: `cpu-${prefix}-${++seq}-${Math.random()}`,
      run_id: 'run-cpu',
      tool: 'test.hash',
      arguments: { ...work, seed: String(seq) },
    },
    { prefix, timeoutMs: 120_000 },
  ).then((o) => {
    if (o.is_error) throw new Error(o.preview);
    spread.perWorker.set(o.worker_id, (spread.perWorker.get(o.worker_id) ?? 0) + 1);
  });

const timed = async (run) => {
  const t0 = performance.now();
  await run();
  return performance.now() - t0;
};

/** 8 calls at once to the fleet's tool subject: its queue group and the workers' busy answers spread them. */
async function batch(prefix) {
  spread.sends = 0;
  spread.perWorker.clear();
  const elapsed = await timed(() => Promise.all(Array.from({ length: 8 }, () => call(prefix))));
  if (spread.sends < 8)
    throw new Error(`counted ${spread.sends} sends for 8 calls: a send path is not counted`);
  return { elapsed, sends: spread.sends, busiest: Math.max(...spread.perWorker.values()) };
}

/**
 * The ceiling of any dispatch: the caller splits the 8 calls 4 + 4 over two single-worker fleets, 2 in flight each
 * (a thread and a queue slot), so no call is ever turned away and no worker waits for one.
 */
async function split(prefixes) {
  const lanes = (prefix) =>
    Promise.all(
      [0, 1].map(async () => {
        for (let i = 0; i < 2; i++) await call(prefix);
      }),
    );
  return { elapsed: await timed(() => Promise.all(prefixes.map(lanes))) };
}

process.on('message', (msg) => {
  void (async () => {
    if (msg.batch) process.send({ result: await batch(msg.batch.prefix) });
    else if (msg.split) process.send({ result: await split(msg.split.prefixes) });
    else if (msg.stop) {
      await bus.close();
      process.disconnect();
    }
  })().catch((error) => process.send({ error: String(error?.stack ?? error) }));
});
process.send({ ready: true });
