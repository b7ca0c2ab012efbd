// One planner process for the submit -> run.accepted figure with the planner in a process of its own (as deployed):
// connects with the default settings, takes runs, prints {"ready":true}; the bench stops it when done.
import { NatsBus, silentLogger } from '@agentmesh/protocol';
import { Planner } from '@agentmesh/planner';

const [natsUrl, prefix, plannerId] = process.argv.slice(2);
const bus = await NatsBus.connect(natsUrl);
const planner = new Planner({ bus, prefix, plannerId, logger: silentLogger(), transcripts: false });
await planner.start();
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
process.once('SIGTERM', () => {
  void planner
    .drain()
    .then(() => bus.close())
    .finally(() => process.exit(0));
});
