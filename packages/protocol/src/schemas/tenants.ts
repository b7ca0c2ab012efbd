/** Tenants: the limits a shared fleet enforces per tenant (configuration `tenants:`). */
import { z } from 'zod';

/** The tenant of runs that name none, and of a fleet with no tenants configured. */
export const DEFAULT_TENANT = 'default';

/** A tenant name: what NATS subjects, KV keys and credentials are built from. */
export const TENANT_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;

export const TenantNameSchema = z
  .string()
  .regex(
    TENANT_NAME_PATTERN,
    'a tenant name is 1-64 characters of a-z, 0-9, "_" or "-", starting with a letter or digit',
  );

const limit = z.number().int().min(0);

/** One tenant's limits; 0 or absent means unlimited. */
export const TenantLimitsSchema = z
  .object({
    /** Runs started and unfinished, counted across every planner (waiting on approval, input or pause counts). */
    max_concurrent_runs: limit.optional(),
    /** Runs waiting to start; a submission beyond it is refused with `queue_full`. */
    max_queued_runs: limit.optional(),
    /** Submissions per minute; beyond it refused with `rate_limited` and `retry_after_ms`. */
    runs_per_minute: limit.optional(),
    /** Tokens per UTC day across all planners, sub-agent children included (`budget_exhausted`). */
    daily_tokens: limit.optional(),
    /** Spend per UTC day in US dollars (`budget_exhausted`). */
    daily_cost_usd: z.number().min(0).optional(),
    /** Share of free capacity when several tenants have runs waiting (default 1). */
    weight: z.number().positive().max(1000).optional(),
  })
  .strict();
export type TenantLimits = z.infer<typeof TenantLimitsSchema>;

/** `tenants:` in the configuration: limits by tenant name. */
export const TenantsConfigSchema = z.record(TenantNameSchema, TenantLimitsSchema);
export type TenantsConfig = z.infer<typeof TenantsConfigSchema>;

/** A run's priority within its tenant: 1 runs first, 5 last. */
export const RunPrioritySchema = z.number().int().min(1).max(5);
export const DEFAULT_RUN_PRIORITY = 3;

/** The limits that apply to `tenant`: its own entry, else the `default` entry, else none (unlimited). */
export function tenantLimits(config: TenantsConfig | undefined, tenant: string): TenantLimits {
  return config?.[tenant] ?? config?.[DEFAULT_TENANT] ?? {};
}
