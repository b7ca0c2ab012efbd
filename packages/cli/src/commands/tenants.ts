import { DEFAULT_PREFIX } from '@agentmesh/protocol';
import { stringFlag, usageError as usage } from '../args.js';
import type { CommandContext } from '../context.js';
import { tenantsSpec } from '../specs/tenants.js';
import { suggestion } from '../suggest.js';
import {
  generateTenantPassword,
  tenantNameProblem,
  tenantPermissions,
  tenantUser,
  tenantUserEntry,
} from '../tenant-users.js';

const usageError = (message: string) => usage(tenantsSpec, message);
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export async function tenantsCommand(ctx: CommandContext): Promise<number> {
  const [verb, name, ...extra] = ctx.args.positionals;
  // loaded on use: usage reads the planner's usage bucket, which add never needs
  if (verb === 'usage') return (await import('./tenants-usage.js')).tenantsUsageCommand(ctx);
  if (verb !== 'add')
    throw usageError(
      verb === undefined
        ? `tenants needs a subcommand: ${tenantsSpec.verbs!.join(', ')}`
        : `unknown subcommand "${verb}"${suggestion(verb, tenantsSpec.verbs!)}: tenants takes ${tenantsSpec.verbs!.join(', ')}`,
    );
  if (name === undefined) throw usageError('tenants add needs the tenant name');
  if (extra.length > 0) throw usageError(`unexpected argument "${extra[0]}"`);
  const problem = tenantNameProblem(name);
  if (problem !== undefined) throw usageError(problem);
  return Promise.resolve(addTenant(ctx, name));
}

function addTenant(ctx: CommandContext, tenant: string): number {
  const prefix = stringFlag(ctx.args, 'prefix', 'AGENTMESH_PREFIX') ?? DEFAULT_PREFIX;
  const env = stringFlag(ctx.args, 'password-env');
  if (env !== undefined && !ENV_NAME.test(env))
    throw usageError(`--password-env must name an environment variable (A-Z, 0-9, _), not "${env}"`);
  const generated = env === undefined ? generateTenantPassword() : undefined;
  const entry = tenantUserEntry(tenant, {
    prefix,
    password: env === undefined ? { value: generated! } : { env },
  });
  const user = tenantUser(tenant);
  if (ctx.args.values['json'] === true) {
    ctx.io.stdout.write(
      `${JSON.stringify({ tenant, user, ...(generated === undefined ? { password_env: env } : { password: generated }), permissions: tenantPermissions(tenant, prefix), entry })}\n`,
    );
    return 0;
  }
  const password = generated ?? `$${env}`;
  ctx.io.stdout.write(
    `# Add to authorization.users in nats.conf, then reload nats-server (nats-server --signal reload):\n${entry}\n\n` +
      `# The tenant's clients connect as its user and use its tenant API:\n` +
      `#   NATS_USER=${user} NATS_PASSWORD=${password} agentmesh run --nats URL --tenant ${tenant} "TASK"\n` +
      `#   (or AGENTMESH_TENANT=${tenant}); runs, sessions and tools commands take --tenant too.\n` +
      (generated === undefined ? '' : '# The password is shown once: keep it in your secret store.\n'),
  );
  return 0;
}
