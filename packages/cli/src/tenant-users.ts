/**
 * The NATS user of a tenant (docs/tenancy.md): allowed only on its own tenant API. `agentmesh tenants add` prints
 * it; deploy/nats/nats.conf carries two (test/tenancy-wire.test.ts checks they are what this prints). Plain data, no
 * heavy imports: the CLI loads it for `tenants add` only.
 */
import { randomBytes } from 'node:crypto';
import { DEFAULT_PREFIX, DEFAULT_TENANT, TENANT_NAME_PATTERN } from '@agentmesh/protocol';

/** The NATS user name of a tenant: `tenant_<name>`, so its reply inbox is `_INBOX_tenant_<name>` (NatsBus). */
export function tenantUser(tenant: string): string {
  return `tenant_${tenant}`;
}

/** The environment variable nats-server reads the tenant's password from: `NATS_TENANT_<NAME>_PASSWORD`. */
export function tenantPasswordEnv(tenant: string): string {
  return `NATS_TENANT_${tenant.toUpperCase().replace(/-/g, '_')}_PASSWORD`;
}

/** What a tenant's user may publish and subscribe to. */
export function tenantPermissions(tenant: string, prefix: string = DEFAULT_PREFIX) {
  const base = `${prefix}.tenant.${tenant}`;
  return {
    publish: { allow: [`${base}.>`], deny: [`${base}.runs.*.events`] },
    subscribe: { allow: [`_INBOX_${tenantUser(tenant)}.>`, `${base}.runs.*.events`] },
  };
}

/** Why `tenant` cannot have a user, or undefined when it can. */
export function tenantNameProblem(tenant: string): string | undefined {
  if (!TENANT_NAME_PATTERN.test(tenant))
    return `tenant name "${tenant}" is not valid: 1-64 characters of a-z, 0-9, "_" or "-", starting with a letter or digit`;
  if (tenant === DEFAULT_TENANT)
    return `"${DEFAULT_TENANT}" is the tenant of runs that name none (the trusted client's); give the tenant another name`;
  return undefined;
}

/** A password nats-server parses as a plain string: a letter, then 48 hex digits (192 bits). */
export function generateTenantPassword(): string {
  return `p${randomBytes(24).toString('hex')}`;
}

const list = (items: readonly string[]) => `[${items.map((s) => JSON.stringify(s)).join(', ')}]`;

/**
 * The `authorization.users` entry of a tenant, indented for nats.conf. `password` is either the name of an
 * environment variable nats-server reads (`{ env }`) or the password itself (`{ value }`).
 */
export function tenantUserEntry(
  tenant: string,
  options: { prefix?: string; password: { env: string } | { value: string } },
): string {
  const p = tenantPermissions(tenant, options.prefix);
  const password =
    'env' in options.password ? `$${options.password.env}` : JSON.stringify(options.password.value);
  return [
    `    { user: ${JSON.stringify(tenantUser(tenant))}, password: ${password}, permissions: {`,
    `        publish: { allow: ${list(p.publish.allow)}, deny: ${list(p.publish.deny)} }`,
    `        subscribe: { allow: ${list(p.subscribe.allow)} }`,
    `      } }`,
  ].join('\n');
}
