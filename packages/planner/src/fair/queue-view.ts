import { ServiceName, type WorkConsumerFacts } from '@agentmesh/protocol';

/** Priorities, first to last. */
export const PRIORITIES = [1, 2, 3, 4, 5] as const;

/** The consumer of a tenant's waiting runs of one priority (`queued.<tenant>.<priority>`). */
export function waitingConsumer(tenant: string, priority: number): string {
  return `${ServiceName.Planner}-w-${tenant}-${priority}`;
}

/** The consumer of a capped tenant's admitted runs (`queued.<tenant>.admitted`), max_ack_pending = its cap. */
export function admittedConsumer(tenant: string): string {
  return `${ServiceName.Planner}-a-${tenant}`;
}

const WAITING = new RegExp(`^${ServiceName.Planner}-w-(.+)-([1-5])$`);
const ADMITTED = new RegExp(`^${ServiceName.Planner}-a-(.+)$`);

/** One tenant's runs in the fair intake, as the queue's consumers count them. */
export interface TenantQueue {
  /** Waiting runs not yet delivered, by priority (index 0 = priority 1). */
  waiting: number[];
  /**
   * Waiting runs delivered and not acked, by priority: started (uncapped tenants), being promoted, or left by a
   * planner that stopped and waiting to be delivered again.
   */
  waitingRunning: number[];
  /** Admitted runs of a capped tenant not yet delivered to a planner. */
  admitted: number;
  /** Admitted runs delivered and not finished: the tenant's started runs, held to its cap by the queue. */
  admittedRunning: number;
}

export function emptyTenantQueue(): TenantQueue {
  return { waiting: [0, 0, 0, 0, 0], waitingRunning: [0, 0, 0, 0, 0], admitted: 0, admittedRunning: 0 };
}

/** Runs of the tenant that wait to start (waiting and admitted, not yet delivered). */
export function queuedRuns(q: TenantQueue): number {
  return q.waiting.reduce((a, b) => a + b, 0) + q.admitted;
}

/** The tenants' queues from the consumers of the runs stream (other consumers are left out). */
export function tenantQueues(facts: readonly WorkConsumerFacts[]): Map<string, TenantQueue> {
  const queues = new Map<string, TenantQueue>();
  const of = (tenant: string) => {
    let q = queues.get(tenant);
    if (q === undefined) queues.set(tenant, (q = emptyTenantQueue()));
    return q;
  };
  for (const f of facts) {
    const waiting = WAITING.exec(f.name);
    if (waiting !== null) {
      const q = of(waiting[1]!);
      q.waiting[Number(waiting[2]) - 1] = f.pending;
      q.waitingRunning[Number(waiting[2]) - 1] = f.ackPending;
      continue;
    }
    const admitted = ADMITTED.exec(f.name);
    if (admitted !== null) {
      const q = of(admitted[1]!);
      q.admitted = f.pending;
      q.admittedRunning = f.ackPending;
    }
  }
  return queues;
}
