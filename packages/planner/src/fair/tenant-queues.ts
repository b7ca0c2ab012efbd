import {
  DEFAULT_RUN_PRIORITY,
  DEFAULT_TENANT,
  actorMetrics,
  tenantLimits,
  type RunRequest,
  type Subjects,
  type TenantsConfig,
  type WorkConsumer,
  type WorkQueue,
} from '@agentmesh/protocol';
import {
  admittedConsumer,
  queuedRuns,
  tenantQueues,
  waitingConsumer,
  type TenantQueue,
} from './queue-view.js';

/** The queue's counts are read at most this often (every planner reads them; one JetStream request each). */
export const VIEW_MAX_AGE_MS = 50;

/** Where a run goes in the fair intake. */
export interface Placement {
  tenant: string;
  priority: number;
  cap: number;
}

/**
 * The tenants' side of the runs stream for one planner: their limits, their consumers (opened once), and a view of
 * their counts read from the stream at most every {@link VIEW_MAX_AGE_MS}.
 */
export class TenantQueues {
  private readonly consumers = new Map<string, Promise<WorkConsumer>>();
  private view: { at: number; queues: Map<string, TenantQueue> } = { at: 0, queues: new Map() };
  private viewRead: Promise<Map<string, TenantQueue>> | undefined;

  constructor(
    private readonly deps: { queue: WorkQueue; subjects: Subjects; tenants: TenantsConfig; leaseMs: number },
  ) {}

  maxQueued(tenant: string): number {
    return tenantLimits(this.deps.tenants, tenant).max_queued_runs ?? 0;
  }

  /** The tenants' queues (waiting, admitted, running from the queues), read from the runs stream. */
  async queues(maxAgeMs = VIEW_MAX_AGE_MS): Promise<Map<string, TenantQueue>> {
    if (Date.now() - this.view.at <= maxAgeMs) return this.view.queues;
    const at = Date.now();
    this.viewRead ??= this.deps.queue
      .consumers()
      .then((facts) => {
        const queues = tenantQueues(facts);
        this.view = { at, queues };
        for (const [tenant, q] of queues) actorMetrics().setTenantQueueDepth(tenant, queuedRuns(q));
        return queues;
      })
      .finally(() => (this.viewRead = undefined));
    return this.viewRead;
  }

  placement(request: RunRequest): Placement {
    const tenant = request.identity?.tenant ?? DEFAULT_TENANT;
    const limits = tenantLimits(this.deps.tenants, tenant);
    return {
      tenant,
      priority: request.priority ?? DEFAULT_RUN_PRIORITY,
      cap: limits.max_concurrent_runs ?? 0,
    };
  }

  weight(tenant: string): number {
    return tenantLimits(this.deps.tenants, tenant).weight ?? 1;
  }

  cap(tenant: string): number {
    return tenantLimits(this.deps.tenants, tenant).max_concurrent_runs ?? 0;
  }

  private consumer(name: string, filterSubject: string, maxAckPending = 0): Promise<WorkConsumer> {
    let opened = this.consumers.get(name);
    if (opened === undefined) {
      opened = this.deps.queue.consumer(name, { ackWaitMs: this.deps.leaseMs, filterSubject, maxAckPending });
      opened.catch(() => this.consumers.delete(name));
      this.consumers.set(name, opened);
    }
    return opened;
  }

  waiting(tenant: string, priority: number): Promise<WorkConsumer> {
    return this.consumer(waitingConsumer(tenant, priority), this.deps.subjects.queuedRuns(tenant, priority));
  }

  admitted(tenant: string): Promise<WorkConsumer> {
    return this.consumer(
      admittedConsumer(tenant),
      this.deps.subjects.queuedRuns(tenant, 'admitted'),
      this.cap(tenant),
    );
  }
}
