/**
 * deploy/nats/nats.conf as tests use it: its users, a fresh password for each (handed to nats-server through the
 * `NATS_<USER>_PASSWORD` variables the file reads), and the environment of an agentmesh process logged in as one.
 */
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { cleanEnv } from './cli.js';

export const DEPLOY_NATS_CONF = fileURLToPath(new URL('../../deploy/nats/nats.conf', import.meta.url));
export const DEPLOY_USERS = [
  'catalog',
  'planner',
  'worker',
  'worker_math',
  'client',
  'ops',
  'tenant_acme',
  'tenant_globex',
] as const;
export type DeployUser = (typeof DEPLOY_USERS)[number];

/** A password per user, set in this process's environment for the nats-server it starts next. */
export function deployPasswords(): Record<DeployUser, string> {
  const passwords = Object.fromEntries(
    DEPLOY_USERS.map((u) => [u, `p${randomBytes(12).toString('hex')}`]),
  ) as Record<DeployUser, string>;
  for (const u of DEPLOY_USERS) process.env[`NATS_${u.toUpperCase()}_PASSWORD`] = passwords[u];
  return passwords;
}

/** The environment of an agentmesh process logged in to `natsUrl` as `user`. */
export function deployUserEnv(
  natsUrl: string,
  user: DeployUser,
  password: string,
  extra: Record<string, string> = {},
): NodeJS.ProcessEnv {
  return cleanEnv({ NATS_URL: natsUrl, NATS_USER: user, NATS_PASSWORD: password, ...extra });
}
