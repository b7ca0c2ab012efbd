// The planner side of the submit -> run.accepted measurements (planner.bench.mjs, accept-probe.mjs, accept-pair.mjs):
// a planner on its own connection with a mini catalog, a client bus to submit on, and a core subscriber that hears
// each run's `run.accepted` and `run.completed`.
import { performance } from 'node:perf_hooks';
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
  const submit = plannerPackage.submitRun;
  return {
    bus,
    clientBus,
    nc,
    planner,
    waiters,
    done,
    /**
     * Submits a scripted 1-turn run and waits for its end; returns the microseconds from the submit until its
     * `run.accepted` was heard. `onAccepted` is called the moment it is heard.
     */
    async submitOne(id, onAccepted) {
      const accepted = new Promise((resolve) =>
        waiters.set(id, () => {
          onAccepted?.();
          resolve();
        }),
      );
      const finished = new Promise((resolve) => done.set(id, resolve));
      const t0 = performance.now();
      await submit(clientBus, { id, task: 'bench', script: [{ text: 'ok' }] }, { prefix });
      await accepted;
      const us = (performance.now() - t0) * 1000;
      waiters.delete(id);
      await finished;
      done.delete(id);
      return us;
    },
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
