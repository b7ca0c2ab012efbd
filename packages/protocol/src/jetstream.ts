import { Svcm } from '@nats-io/services';
import { DiscardPolicy, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import type { StreamConfig } from '@nats-io/jetstream';
import type { Bus } from './bus/types.js';
import { NatsBus } from './bus/nats-bus.js';
import { DEFAULT_PREFIX, EVENTS_STREAM, RUNS_STREAM, subjects } from './subjects.js';

/** Stream names for a prefix: `AGENTMESH_RUNS` / `AGENTMESH_EVENTS` for the default prefix. */
export function streamNames(prefix: string = DEFAULT_PREFIX): { runs: string; events: string } {
  if (prefix === DEFAULT_PREFIX) return { runs: RUNS_STREAM, events: EVENTS_STREAM };
  const p = prefix.toUpperCase().replace(/[^A-Z0-9]/g, '_');
  return { runs: `${p}_RUNS`, events: `${p}_EVENTS` };
}

export interface RunStreamOptions {
  /** How long events are kept for replay (default 7 days). */
  eventsMaxAgeMs?: number;
  /** Window in which a resubmitted run id is dropped by the server (default 10 minutes). */
  duplicateWindowMs?: number;
}

/** Creates or updates the run intake (work queue) and run events (limits, replayable) streams. */
export async function ensureRunStreams(
  bus: NatsBus,
  prefix: string = DEFAULT_PREFIX,
  options: RunStreamOptions = {},
) {
  const jsm = await bus.jetstreamManager();
  const s = subjects(prefix);
  const names = streamNames(prefix);
  const ms = (n: number) => n * 1_000_000;
  const num_replicas = Number(process.env['AGENTMESH_REPLICAS'] ?? 1) || 1;
  const configs: (Partial<StreamConfig> & { name: string })[] = [
    {
      name: names.runs,
      subjects: [s.runsSubmit],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      duplicate_window: ms(options.duplicateWindowMs ?? 10 * 60_000),
      max_msg_size: bus.maxPayload,
      num_replicas,
    },
    {
      name: names.events,
      subjects: [s.allRunEvents],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      discard: DiscardPolicy.Old,
      max_age: ms(options.eventsMaxAgeMs ?? 7 * 24 * 3_600_000),
      duplicate_window: ms(2 * 60_000),
      num_replicas,
    },
  ];
  for (const config of configs) {
    try {
      await jsm.streams.info(config.name);
      await jsm.streams.update(config.name, config);
    } catch {
      await jsm.streams.add(config);
    }
  }
  return names;
}

export interface ServiceHandle {
  stop(): Promise<void>;
}

/**
 * Announces an actor on NATS service discovery (`$SRV.PING`, `$SRV.INFO`, `$SRV.STATS`). On the in-process bus
 * there is nothing to announce.
 */
export async function announceService(
  bus: Bus,
  config: { name: string; version: string; description: string; metadata?: Record<string, string> },
): Promise<ServiceHandle> {
  if (!(bus instanceof NatsBus)) return { stop: async () => undefined };
  const service = await new Svcm(bus.nc).add({ ...config });
  return {
    stop: async () => {
      await service.stop().catch(() => undefined);
    },
  };
}

export interface DiscoveredService {
  name: string;
  id: string;
  version: string;
  metadata: Record<string, string>;
}

/** Lists the actors answering `$SRV.PING` (optionally one service name) within `timeoutMs`. */
export async function discoverServices(
  bus: NatsBus,
  name?: string,
  timeoutMs = 1000,
): Promise<DiscoveredService[]> {
  const client = new Svcm(bus.nc).client({ strategy: 'timer', maxWait: timeoutMs });
  const out: DiscoveredService[] = [];
  for await (const s of await client.ping(name))
    out.push({ name: s.name, id: s.id, version: s.version, metadata: s.metadata ?? {} });
  return out.sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id));
}
