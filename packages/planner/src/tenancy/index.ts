export { mirrorTenantEvents } from './mirror.js';
export { serveTenantApi, type TenantApiDeps, type TenantSessionStore } from './tenant-api.js';
export { tenantRequest } from './tenant-runs.js';
export { followTenantRun, submitAsTenant, tenantRunHistory } from './tenant-client.js';
