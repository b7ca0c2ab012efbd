// One planner process for the failover bench: connects, takes runs, prints {"ready":true}; the bench kills it -9.
import { NatsBus, silentLogger } from '@agentmesh/protocol';
import { Planner } from '@agentmesh/planner';

const [natsUrl, prefix, plannerId] = process.argv.slice(2);
const bus = await NatsBus.connect(natsUrl);
// fast failover (AGENTMESH_REDELIVER_MS=1000 for `agentmesh planner`): the default waits out the 10 s lease
const planner = new Planner({
  bus,
  prefix,
  plannerId,
  logger: silentLogger(),
  transcripts: false,
  durability: { redeliverMs: 1_000 },
});
await planner.start();
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
