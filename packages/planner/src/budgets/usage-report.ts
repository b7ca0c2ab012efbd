import {
  DEFAULT_PREFIX,
  tenantLimits,
  type Backend,
  type TenantLimits,
  type TenantsConfig,
} from '@agentmesh/protocol';
import { openTenantUsage, TenantLedger, utcDay, type TenantUsage } from './ledger.js';

/** One tenant's usage today against its limits (`agentmesh tenants usage`). */
export interface TenantUsageReport extends TenantUsage {
  tenant: string;
  /** The UTC day counted (YYYY-MM-DD). */
  day: string;
  /** Runs submitted in the current minute (counted only when the tenant has `runs_per_minute`). */
  runs_this_minute: number;
  /** The limits that apply (its own entry, else `default`); absent keys are unlimited. */
  limits: Pick<TenantLimits, 'runs_per_minute' | 'daily_tokens' | 'daily_cost_usd'>;
}

/**
 * Usage today of `only`, or of every tenant configured or with usage today (named order), read from the tenant
 * usage bucket every planner writes to.
 */
export async function tenantUsageReport(
  bus: Backend,
  options: { prefix?: string; tenants?: TenantsConfig | undefined; only?: string | undefined; now?: number },
): Promise<TenantUsageReport[]> {
  const now = options.now ?? Date.now();
  const ledger = new TenantLedger(await openTenantUsage(bus, options.prefix ?? DEFAULT_PREFIX), () => now);
  const used = await ledger.allUsageToday();
  const names =
    options.only !== undefined
      ? [options.only]
      : [...new Set([...Object.keys(options.tenants ?? {}), ...used.keys()])].sort();
  return Promise.all(
    names.map(async (tenant) => {
      const { runs_per_minute, daily_tokens, daily_cost_usd } = tenantLimits(options.tenants, tenant);
      const limits = {
        ...(runs_per_minute ? { runs_per_minute } : {}),
        ...(daily_tokens ? { daily_tokens } : {}),
        ...(daily_cost_usd ? { daily_cost_usd } : {}),
      };
      return {
        tenant,
        day: utcDay(now),
        ...(used.get(tenant) ?? { tokens: 0, cost_usd: 0, turns: 0 }),
        runs_this_minute: runs_per_minute ? await ledger.runsThisMinute(tenant) : 0,
        limits,
      };
    }),
  );
}
