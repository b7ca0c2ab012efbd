// The bus alone: request/reply p50, p99 and throughput at 1 and 64 in flight on NatsBus and MemoryBus, next to
// a raw @nats-io request/reply and a plain async function call, all measured in this run.
import { connect } from '@nats-io/transport-node';
import { MemoryBus, NatsBus } from '@agentmesh/protocol';
import { figure, latencyFigures, measure } from './lib.mjs';

export const title = 'Bus: request/reply, 200 B JSON payload';

const payload = new TextEncoder().encode(
  JSON.stringify({
    call_id: 'c-000001',
    tool: 'math.calc',
    run_id: 'run-1',
    arguments: { lhs: 2, rhs: 3, op: 'add' },
    pad: 'x'.repeat(90),
  }),
);

export async function run({ natsUrl, quick }) {
  const count1 = quick ? 1000 : 5000;
  const count64 = quick ? 5000 : 40000;
  const figures = [];

  const raw = await connect({ servers: natsUrl, noAsyncTraces: true });
  const rawResponder = await connect({ servers: natsUrl, noAsyncTraces: true });
  rawResponder.subscribe('bench.raw', { callback: (_e, m) => m.respond(m.data) });
  await rawResponder.flush();

  const natsBus = await NatsBus.connect(natsUrl, { requireJetStream: false });
  const natsResponder = await NatsBus.connect(natsUrl, { requireJetStream: false });
  natsResponder.subscribe('bench.bus', (m) => natsResponder.respond(m, m.data));
  await natsResponder.flush();

  const mem = new MemoryBus();
  mem.subscribe('bench.mem', (m) => mem.respond(m, m.data));

  const plain = async (x) => x;

  for (const [concurrency, count] of [
    [1, count1],
    [64, count64],
  ]) {
    const fn = await measure(() => plain(payload), { count, concurrency });
    const rawR = await measure(() => raw.request('bench.raw', payload, { timeout: 5000 }), {
      count,
      concurrency,
    });
    const busR = await measure(() => natsBus.request('bench.bus', payload), { count, concurrency });
    const memR = await measure(() => mem.request('bench.mem', payload), { count, concurrency });
    const at = `@${concurrency} in flight`;
    figures.push(...latencyFigures(`plain function call ${at}`, fn));
    figures.push(...latencyFigures(`raw nc.request ${at}`, rawR));
    figures.push(...latencyFigures(`NatsBus.request ${at}`, busR, `raw nc.request ${at}`, rawR));
    figures.push(...latencyFigures(`MemoryBus.request ${at}`, memR, `plain function call ${at}`, fn));
  }
  await raw.close();
  await rawResponder.close();
  await natsBus.close();
  await natsResponder.close();
  await mem.close();
  void figure;
  return figures;
}
