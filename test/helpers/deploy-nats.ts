/**
 * deploy/nats/nats.conf as tests use it: its users, a fresh password for each (handed to nats-server through the
 * `NATS_<USER>_PASSWORD` variables the file reads), and the environment of an agentmesh process logged in as one.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NatsBus } from '@agentmesh/protocol';
import { cleanEnv, startActor, type ActorProcess } from './cli.js';
import { startNatsServer, type NatsServerHandle } from './nats-server.js';

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

/** A nats-server on deploy/nats's config with a catalog and a planner logged in as their users, and a `client`. */
export interface DeployFleet {
  nats: NatsServerHandle;
  client: NatsBus;
  planner: ActorProcess;
  /** The environment of an agentmesh process logged in as `user`. */
  as(user: DeployUser): NodeJS.ProcessEnv;
  dispose(): Promise<void>;
}

/** Starts a {@link DeployFleet} whose planner reads `configYaml` (e.g. the fleet's `tenants:`). */
export async function startDeployFleet(configYaml: string): Promise<DeployFleet> {
  const passwords = deployPasswords();
  const nats = await startNatsServer({ configFile: DEPLOY_NATS_CONF });
  const dir = mkdtempSync(join(tmpdir(), 'deploy-fleet-'));
  const config = join(dir, 'agentmesh.yaml');
  writeFileSync(config, configYaml);
  const as = (user: DeployUser) => deployUserEnv(nats.url, user, passwords[user]);
  const started: ActorProcess[] = [];
  const client = await NatsBus.connect(nats.url, { user: 'client', pass: passwords.client });
  const dispose = async () => {
    for (const a of started) await a.stop('SIGKILL').catch(() => undefined);
    await client.close();
    await nats.dispose();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    started.push(await startActor(['catalog'], as('catalog')));
    const planner = await startActor(['planner', '--config', config], as('planner'));
    started.push(planner);
    return { nats, client, planner, as, dispose };
  } catch (error) {
    await dispose();
    throw error;
  }
}
