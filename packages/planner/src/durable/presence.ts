import {
  ErrorCode,
  encodeJson,
  isAgentMeshError,
  respondJson,
  subjects as buildSubjects,
  type Backend,
  type Logger,
  type Subscription,
} from '@agentmesh/protocol';
import type { RunLease } from './lease.js';

/** How long a planner waits for another one to say whether it still holds a run (silence counts as holding). */
const PROBE_TIMEOUT_MS = 1_000;
const dec = new TextDecoder();

function presenceSubject(prefix: string, plannerId: string): string {
  return buildSubjects(prefix).plannerHolds(plannerId);
}

/**
 * A planner's liveness signal to the others: it answers, on its own subject, whether it holds a run. A run whose
 * planner is gone (its connection closed: no responders, e.g. after kill -9) or says it no longer holds it can be
 * taken over at once instead of after the lease. A planner that loses its connection gives up every run it holds
 * first (they may be taken over while it is away), so a planner never writes to a run another one took.
 */
export class PlannerPresence {
  private readonly held = new Map<string, RunLease | undefined>();
  private sub: Subscription | undefined;
  private offStatus: (() => void) | undefined;

  constructor(
    private readonly backend: Backend,
    private readonly prefix: string,
    private readonly plannerId: string,
    private readonly logger: Logger,
    /** Fast failover (redelivery before the lease ends) needs a disconnected planner to give its runs up. */
    private readonly options: { giveUpOnDisconnect: boolean } = { giveUpOnDisconnect: true },
  ) {}

  start(): void {
    if (this.sub !== undefined) return;
    this.sub = this.backend.subscribe(presenceSubject(this.prefix, this.plannerId), (msg) => {
      let runId = '';
      try {
        runId = String((JSON.parse(msg.text()) as { run_id?: unknown }).run_id ?? '');
      } catch {
        // a malformed probe is answered as a probe for no run
      }
      respondJson(this.backend, msg, { holds: this.held.has(runId) });
    });
    this.offStatus = this.backend.onStatus((status) => {
      if (status.type === 'disconnect' && this.options.giveUpOnDisconnect)
        this.fenceAll('the connection to NATS dropped');
    });
  }

  stop(): void {
    this.sub?.unsubscribe();
    this.sub = undefined;
    this.offStatus?.();
    this.offStatus = undefined;
  }

  /** Marks a run held from before its lease is taken (so a probe never misses it) until the returned release. */
  claim(runId: string): { attach: (lease: RunLease) => void; release: () => void } {
    this.held.set(runId, undefined);
    return {
      attach: (lease) => {
        if (this.held.has(runId)) this.held.set(runId, lease);
        else lease.fence('the connection to NATS dropped while the run was taken');
      },
      release: () => void this.held.delete(runId),
    };
  }

  /** True when `plannerId` is gone or says it does not hold `runId`; false when it holds it or does not answer. */
  async holderGone(plannerId: string, runId: string): Promise<boolean> {
    if (plannerId === this.plannerId) return !this.held.has(runId);
    try {
      const reply = await this.backend.request(
        presenceSubject(this.prefix, plannerId),
        encodeJson({ run_id: runId }),
        { timeoutMs: PROBE_TIMEOUT_MS },
      );
      return (JSON.parse(dec.decode(reply.data)) as { holds?: unknown }).holds === false;
    } catch (error) {
      return isAgentMeshError(error, ErrorCode.NoResponders);
    }
  }

  /**
   * Hands the runs held here that `which` picks to other planners now (a draining planner): each lease ends early
   * and the run stops here; its intake message goes back for another planner to resume it from its checkpoint.
   */
  async release(why: string, which: (lease: RunLease) => boolean = () => true): Promise<number> {
    const picked = [...this.held.values()].filter(
      (lease): lease is RunLease => lease !== undefined && !lease.lost && which(lease),
    );
    await Promise.all(picked.map((lease) => lease.release(why)));
    return picked.length;
  }

  private fenceAll(why: string): void {
    if (this.held.size === 0) return;
    this.logger.warn({ runs: this.held.size, why }, 'giving up the runs held here');
    for (const lease of this.held.values()) lease?.fence(why);
    this.held.clear();
  }
}
