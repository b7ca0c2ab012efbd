export { TenantQuotas, overBudget, tenantOf } from './quotas.js';
export {
  TenantLedger,
  openTenantUsage,
  tenantUsageBucket,
  utcDay,
  type RateSlot,
  type TenantUsage,
} from './ledger.js';
export { tenantUsageReport, type TenantUsageReport } from './usage-report.js';
