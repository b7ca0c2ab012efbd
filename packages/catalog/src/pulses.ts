import { encodeJson, parseJson } from '@agentmesh/protocol';

/** Most worker ids in one pulse entry: 2,000 ids of up to 64 bytes stay far under the default 1 MiB payload. */
export const PULSE_CHUNK = 2000;

/**
 * KV keys of the batched heartbeats: `pulses.<replica>.<chunk>`, one set per catalog replica, overwritten by each
 * flush. A key left by a replica that stopped is never delivered again by the watch; read in a later snapshot it
 * only marks its workers seen at load, as the sweep does for every worker it has not seen yet.
 */
export const PulseKeys = {
  of: (replica: string, chunk: number) => `pulses.${replica}.${chunk}`,
  is: (key: string) => key.startsWith('pulses.'),
} as const;

/**
 * The heartbeats one catalog replica answered, batched: a heartbeat only notes its worker here (the answering
 * replica marks it seen at once), and every flush writes the ids heard since the last one as a few KV entries, so
 * the other replicas learn of them with one watch delivery per chunk rather than one KV write and one watch wake-up
 * per heartbeat. The flush interval is at most a fifth of the shortest worker ttl, as the expiry sweep's is.
 */
export class PulseBatch {
  private heard = new Set<string>();

  constructor(private readonly replica: string) {}

  /** Notes a heartbeat of `workerId`. */
  note(workerId: string): void {
    this.heard.add(workerId);
  }

  /** The entries to write for the heartbeats noted since the last call (none when there were none). */
  take(): { key: string; value: Uint8Array }[] {
    if (this.heard.size === 0) return [];
    const ids = [...this.heard];
    this.heard = new Set();
    const out: { key: string; value: Uint8Array }[] = [];
    for (let i = 0; i < ids.length; i += PULSE_CHUNK)
      out.push({
        key: PulseKeys.of(this.replica, out.length),
        value: encodeJson({ ids: ids.slice(i, i + PULSE_CHUNK) }),
      });
    return out;
  }
}

/** The worker ids of a pulse entry; anything that is not `{ids: string[]}` yields none (a foreign write). */
export function pulseIds(value: Uint8Array): string[] {
  const body = parseJson(value, 'catalog pulse') as { ids?: unknown } | null;
  if (!Array.isArray(body?.ids)) return [];
  return body.ids.filter((id): id is string => typeof id === 'string');
}
