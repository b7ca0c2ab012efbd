// The planner side of the submit -> run.accepted measurements (planner.bench.mjs, accept-probe.mjs, accept-pair.mjs):
// a planner on its own connection with a mini catalog, a client bus to submit on, and a core subscriber that hears
// each run's `run.accepted` and `run.completed`.
import { connect } from '@nats-io/transport-node';
import * as protocolOfThisTree from '@agentmesh/protocol';
import * as plannerOfThisTree from '@agentmesh/planner';
import { miniCatalog } from './embedded-mesh.mjs';

/**
 * Starts the rig. `waiters` and `done` map a run id to the function called when its `run.accepted` and
 * `run.completed` are heard. `packages` picks the builds (accept-pair.mjs passes a baseline tree's); `stop()` drains
 * the planner, deletes the streams named with `prefix` and closes the connections.
 */
export async function acceptRig(
  natsUrl,
  prefix,
  plannerId,
  { protocol = protocolOfThisTree, planner: plannerPackage = plannerOfThisTree } = {},
) {
  const bus = await protocol.NatsBus.connect(natsUrl);
  const clientBus = await protocol.NatsBus.connect(natsUrl);
  const nc = await connect({ servers: natsUrl });
  const stopCatalog = miniCatalog(bus, [], prefix);
  const planner = new plannerPackage.Planner({
    bus,
    prefix,
    logger: protocol.silentLogger(),
    plannerId,
    transcripts: false,
  });
  await planner.start();
  const waiters = new Map();
  const done = new Map();
  nc.subscribe(protocol.subjects(prefix).allRunEvents, {
    callback: (_e, msg) => {
      const e = msg.json();
      if (e.type === 'run.accepted') waiters.get(e.run_id)?.();
      if (e.type === 'run.completed') done.get(e.run_id)?.();
    },
  });
  await nc.flush();
  let drained = false;
  return {
    bus,
    clientBus,
    nc,
    planner,
    waiters,
    done,
    submitRun: plannerPackage.submitRun,
    /** Drains the planner (once; a caller may drain it earlier to measure another planner on the same streams). */
    async drain() {
      if (drained) return;
      drained = true;
      await planner.drain();
    },
    async stop() {
      await this.drain();
      stopCatalog();
      const jsm = await bus.jetstreamManager();
      for (const stream of await jsm.streams
        .names()
        .next()
        .catch(() => []))
        if (stream.toLowerCase().includes(prefix.toLowerCase()))
          await jsm.streams.delete(stream).catch(() => undefined);
      await nc.close();
      await clientBus.close();
      await bus.close();
    },
  };
}
