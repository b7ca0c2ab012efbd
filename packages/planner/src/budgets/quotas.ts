import {
  AgentMeshError,
  DEFAULT_TENANT,
  ErrorCode,
  tenantLimits,
  type Backend,
  type KvStore,
  type Logger,
  type RunRequest,
  type TenantLimits,
  type TenantsConfig,
} from '@agentmesh/protocol';
import type { RunQuota } from '../run/ports.js';
import { msToNextUtcDay, openTenantUsage, TenantLedger, utcDay, type TenantUsage } from './ledger.js';

export interface QuotaDeps {
  bus: Backend;
  prefix: string;
  tenants: TenantsConfig;
  logger: Logger;
  now?: () => number;
}

/** The tenant a run is counted for: its identity's, else `default` (a child carries its parent's identity). */
export function tenantOf(request: RunRequest): string {
  return request.identity?.tenant ?? DEFAULT_TENANT;
}

const hasBudget = (limits: TenantLimits) => Boolean(limits.daily_tokens) || Boolean(limits.daily_cost_usd);

/** Why `usage` is over the tenant's daily budget, or undefined while within it. */
export function overBudget(tenant: string, limits: TenantLimits, usage: TenantUsage): string | undefined {
  const { daily_tokens: tokens, daily_cost_usd: cost } = limits;
  if (tokens && usage.tokens >= tokens)
    return `tenant "${tenant}" used its daily_tokens (${tokens}): ${usage.tokens} tokens today (UTC)`;
  if (cost && usage.cost_usd >= cost)
    return `tenant "${tenant}" used its daily_cost_usd ($${cost}): $${usage.cost_usd.toFixed(6)} spent today (UTC)`;
  return undefined;
}

/**
 * The per-tenant submit rate and daily budgets of a fleet with `tenants:` configured, counted across every planner
 * in the tenant usage bucket. A tenant without a limit costs no KV round trip on admission; its usage is still
 * counted, in the background, for `agentmesh tenants usage`.
 */
export class TenantQuotas {
  private ledgerPromise: Promise<TenantLedger> | undefined;
  private readonly now: () => number;

  constructor(private readonly deps: QuotaDeps) {
    this.now = deps.now ?? Date.now;
  }

  private ledger(): Promise<TenantLedger> {
    this.ledgerPromise ??= openTenantUsage(this.deps.bus, this.deps.prefix)
      .then((kv) => new TenantLedger(kv, this.now))
      .catch((error: unknown) => {
        this.ledgerPromise = undefined;
        throw error;
      });
    return this.ledgerPromise;
  }

  /**
   * Admission of a new run: undefined when it may be accepted, else the refusal: `budget_exhausted` when its tenant's
   * daily budget is spent, `rate_limited` (with `retry_after_ms`) beyond `runs_per_minute`. A run id the run records
   * already hold (a redelivery, a duplicate) is let through: the intake dedupes it. Every new submission takes a
   * slot, one refused for its budget too.
   */
  async admit(
    request: RunRequest,
    runId: string,
    records: KvStore,
    options: { countSubmission?: boolean } = {},
  ): Promise<AgentMeshError | undefined> {
    const tenant = tenantOf(request);
    const limits = tenantLimits(this.deps.tenants, tenant);
    const perMinute = options.countSubmission === false ? undefined : limits.runs_per_minute;
    if (!hasBudget(limits) && !perMinute) return undefined;
    const ledger = await this.ledger();
    // one round trip: a run id seen before (a redelivery) may have taken a slot it did not need
    const [known, usage, slot] = await Promise.all([
      records.get(runId),
      hasBudget(limits) ? ledger.usageToday(tenant) : undefined,
      perMinute ? ledger.takeRunSlot(tenant, perMinute) : undefined,
    ]);
    if (known !== null) return undefined;
    const why = usage && overBudget(tenant, limits, usage);
    if (usage && why) return this.exhaustedError(tenant, limits, usage, why);
    if (slot === undefined || slot.ok) return undefined;
    return new AgentMeshError(
      ErrorCode.RateLimited,
      `tenant "${tenant}" submitted ${slot.used} runs this minute, its runs_per_minute (${perMinute}): retry in ${slot.retryAfterMs} ms`,
      { retryable: true, details: { tenant, runs_per_minute: perMinute, retry_after_ms: slot.retryAfterMs } },
    );
  }

  private exhaustedError(tenant: string, limits: TenantLimits, usage: TenantUsage, why: string) {
    const at = this.now();
    return new AgentMeshError(ErrorCode.BudgetExhausted, `${why}: the run was not started`, {
      retryable: false,
      details: {
        tenant,
        day: utcDay(at),
        tokens: usage.tokens,
        cost_usd: usage.cost_usd,
        ...(limits.daily_tokens ? { daily_tokens: limits.daily_tokens } : {}),
        ...(limits.daily_cost_usd ? { daily_cost_usd: limits.daily_cost_usd } : {}),
        retry_after_ms: msToNextUtcDay(at),
      },
    });
  }

  /** The budget of one run of `request`'s tenant, checked before and counted after each model turn. */
  forRun(request: RunRequest): RunQuota {
    const tenant = tenantOf(request);
    const limits = tenantLimits(this.deps.tenants, tenant);
    const log = this.deps.logger.child({ run_id: request.id, tenant });
    const add = async (turn: { tokens: number; cost_usd: number | undefined }) => {
      try {
        await (await this.ledger()).addUsage(tenant, turn);
      } catch (error) {
        log.warn({ err: (error as Error).message }, 'tenant usage not counted');
      }
    };
    if (!hasBudget(limits))
      return {
        exhausted: () => Promise.resolve(undefined),
        record: (turn) => {
          void add(turn);
          return Promise.resolve();
        },
      };
    return {
      exhausted: async () => {
        try {
          return overBudget(tenant, limits, await (await this.ledger()).usageToday(tenant));
        } catch (error) {
          log.warn({ err: (error as Error).message }, 'tenant budget not checked before this turn');
          return undefined;
        }
      },
      record: add,
    };
  }
}
