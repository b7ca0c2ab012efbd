/**
 * A test fleet on a real nats-server under one unique prefix: a client connection, a stand-in tool mesh, planners
 * started in this process (each on its own connection, as separate processes would be), and one teardown that
 * drains them and drops every stream, bucket and object store of the prefix.
 */
import { NatsBus, silentLogger } from '@agentmesh/protocol';
import { Planner, checkpointsBucket, type PlannerOptions } from '@agentmesh/planner';
import { calcTool, startFakeMesh, type FakeMesh } from '../fixtures/llm/mesh.js';
import { dropPrefix, uniquePrefix } from '../fixtures/llm/nats.js';

export interface NatsFleet {
  readonly prefix: string;
  readonly client: NatsBus;
  readonly mesh: FakeMesh;
  /** The planners started so far, oldest first. */
  readonly planners: readonly Planner[];
  /** Starts a planner on a connection of its own; the fleet drains it on stop. */
  planner(id: string, options?: Partial<PlannerOptions>): Promise<{ planner: Planner; bus: NatsBus }>;
  /** Runs `fn` on stop (before planners drain), e.g. killing actor processes. */
  onStop(fn: () => Promise<unknown> | unknown): void;
  stop(): Promise<void>;
}

export async function startNatsFleet(
  natsUrl: string,
  options: { prefixTag: string; tools?: Parameters<typeof startFakeMesh>[1] },
): Promise<NatsFleet> {
  const prefix = uniquePrefix(options.prefixTag);
  const client = await NatsBus.connect(natsUrl);
  const mesh = startFakeMesh(client, options.tools ?? [calcTool], { prefix });
  const planners: Planner[] = [];
  const buses: NatsBus[] = [];
  const stoppers: Array<() => Promise<unknown> | unknown> = [];
  return {
    prefix,
    client,
    mesh,
    planners,
    async planner(id, plannerOptions = {}) {
      const bus = await NatsBus.connect(natsUrl);
      buses.push(bus);
      const planner = new Planner({ bus, prefix, logger: silentLogger(), plannerId: id, ...plannerOptions });
      await planner.start();
      planners.push(planner);
      return { planner, bus };
    },
    onStop(fn) {
      stoppers.push(fn);
    },
    async stop() {
      for (const fn of stoppers) await Promise.resolve(fn()).catch(() => undefined);
      for (const p of planners) await p.drain().catch(() => undefined);
      mesh.stop();
      const jsm = await client.jetstreamManager();
      await jsm.streams.delete(`KV_${checkpointsBucket(prefix)}`).catch(() => undefined);
      await dropPrefix(client, prefix);
      for (const b of buses) await b.close().catch(() => undefined);
      await client.close();
    },
  };
}
