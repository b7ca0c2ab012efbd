// The catalog of the `fleet scale` bench, in a process of its own as deployed (run with --expose-gc). IPC in:
// {ask: 'count' | 'usage' | 'memory', id}; IPC out: {up} | {id, value}. `usage`: CPU (us) since start and the time;
// `memory`: heap and RSS after a full collection.
import { performance } from 'node:perf_hooks';
import { Catalog } from '@agentmesh/catalog';
import { NatsBus, silentLogger } from '@agentmesh/protocol';

const [natsUrl, prefix, bucket] = process.argv.slice(2);
const bus = await NatsBus.connect(natsUrl, { name: 'scale-catalog' });
const catalog = new Catalog({ bus, prefix, bucket, logger: silentLogger() });
await catalog.start();

async function memory() {
  globalThis.gc?.();
  await new Promise((r) => setTimeout(r, 20));
  globalThis.gc?.();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, rss: m.rss };
}

const answers = {
  count: () => catalog.toolNames().length,
  usage: () => {
    const u = process.cpuUsage();
    return { cpu_us: u.user + u.system, at_ms: performance.now() };
  },
  memory,
};

process.on('message', (msg) => {
  void Promise.resolve(answers[msg.ask]()).then((value) => process.send({ id: msg.id, value }));
});
process.once('disconnect', () => {
  void catalog
    .stop()
    .then(() => bus.close())
    .finally(() => process.exit(0));
});
process.send({ up: true });
