// Experiment behind docs/benchmarks.md "Issue 37, seventh sitting: the call at 64 in flight and the garbage
// collector": how the length of a block decides agentmesh's ratio to Moleculer at 64 in flight. Forks the bench's own
// contenders (tool-call-contender.mjs), pinned to core 1 as `npm run bench` pins them, and alternates them block by
// block; not part of `npm run bench`. Against a nats-server with JetStream pinned to core 0:
//   node bench/tool-call-blocks.mjs NATS_URL [CALLS_A_BLOCK=2500] [BLOCKS=15] [CONTENDERS=agentmesh,moleculer]
import { fileURLToPath } from 'node:url';
import { alternated, forkAsker, median } from './lib.mjs';

const CONTENDER = fileURLToPath(new URL('./tool-call-contender.mjs', import.meta.url));
const [natsUrl, callsArg = '2500', blocksArg = '15', kindsArg = 'agentmesh,moleculer'] =
  process.argv.slice(2);
const [count, blocks, kinds] = [Number(callsArg), Number(blocksArg), kindsArg.split(',')];
const prefix = `blocks${process.pid}`;

async function start(kind, sample) {
  const child = await forkAsker(CONTENDER, [kind, natsUrl, prefix], { label: kind, cores: '1' });
  const ready = await child.ask({ start: { sample } });
  return {
    kind,
    sample: ready.sample,
    measure: async (options) => (await child.ask({ measure: options })).result,
    stop: child.stop,
  };
}

const contenders = [];
for (const kind of kinds) contenders.push(await start(kind, contenders[0]?.sample));
for (const c of contenders) await c.measure({ count: count * 5, concurrency: 64 });
const results = await alternated(
  contenders.map((c) => () => c.measure({ count, concurrency: 64 })),
  blocks,
);
const med = (rs, key) => median(rs.map((r) => r[key]));
contenders.forEach((c, i) => {
  const rs = results[i];
  console.log(
    c.kind.padEnd(12),
    `throughput ${med(rs, 'throughput').toFixed(0)}/s, p50 ${med(rs, 'p50_us').toFixed(0)} us,`,
    `p99 ${med(rs, 'p99_us').toFixed(0)} us, GC a block ${med(rs, 'gc_pause_ms').toFixed(2)} ms,`,
    `longest pause ${med(rs, 'gc_max_pause_ms').toFixed(2)} ms`,
  );
});
const paired = (key) => median(results[0].map((r, b) => r[key] / results[1][b][key])).toFixed(2);
if (contenders.length > 1)
  console.log(
    `${kinds[0]} vs ${kinds[1]}, paired by block: throughput ${paired('throughput')}x, p99 ${paired('p99_us')}x`,
  );
await Promise.all(contenders.map((c) => c.stop()));
