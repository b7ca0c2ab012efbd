// One process of the `fleet scale` bench holding many tool workers: each is a full `ToolWorker` (the package's public
// API: registration, heartbeats and calls as in production) on a NATS connection of its own, serving 10 tools. The
// tools take their names and descriptions from the catalog bench's synthetic set, so search sees a realistic corpus.
// The tools are defined first (zod to JSON Schema, ajv compiles: CPU that a real worker spends once, in a process of
// its own), then the workers connect when the bench says go, so the registration figure is the fleet's, not 10,000
// schema compiles on 2 shared cores.
// argv: NATS_URL PREFIX FROM TO HEARTBEAT_MS [NAME_PREFIX]; IPC in: {go}; IPC out: {built, ms} | {connected, ms} |
// {registered, ms} (ms since go).
import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import { NatsBus, silentLogger } from '@agentmesh/protocol';
import { ToolWorker, defineTool } from '@agentmesh/tool-worker';
import { syntheticTools } from './catalog.bench.mjs';

const [natsUrl, prefix, fromArg, toArg, heartbeatArg, namePrefix = ''] = process.argv.slice(2);
const [from, to, heartbeatMs] = [fromArg, toArg, heartbeatArg].map(Number);
const TOOLS_PER_WORKER = 10;
const CONNECT_LANES = 16;
const specs = syntheticTools(to * TOOLS_PER_WORKER);

/** The 10 tools of worker `w`: cheap echo handlers, idempotent (no shared outcome store per worker). */
function toolsOf(w) {
  const out = [];
  for (let j = 0; j < TOOLS_PER_WORKER; j++) {
    const spec = specs[w * TOOLS_PER_WORKER + j];
    out.push(
      defineTool({
        name: `${namePrefix}${spec.name}`,
        description: spec.description,
        input: z.object({ n: z.number() }),
        output: z.object({ n: z.number() }),
        idempotent: true,
        timeoutMs: 5000,
        handler: ({ n }) => ({ n }),
      }),
    );
  }
  return out;
}

const tb = performance.now();
const defined = new Map();
for (let w = from; w < to; w++) defined.set(w, toolsOf(w));
process.send({ built: true, ms: performance.now() - tb });
await new Promise((resolve) => process.once('message', resolve));

const workers = [];
const t0 = performance.now();
let next = from;
await Promise.all(
  Array.from({ length: CONNECT_LANES }, async () => {
    while (next < to) {
      const w = next++;
      const bus = await NatsBus.connect(natsUrl, { name: `scale-w${w}`, requireJetStream: false });
      const worker = new ToolWorker({
        bus,
        prefix,
        workerId: `${namePrefix}scale-w${w}`,
        tools: defined.get(w),
        logger: silentLogger(),
        heartbeatMs,
        artifacts: false,
        concurrency: 64,
      });
      await worker.start();
      workers.push(worker);
    }
  }),
);
process.send({ connected: true, ms: performance.now() - t0 });
await Promise.all(workers.map((w) => w.whenRegistered()));
process.send({ registered: true, ms: performance.now() - t0 });
process.on('message', () => undefined);
process.once('disconnect', () => process.exit(0));
