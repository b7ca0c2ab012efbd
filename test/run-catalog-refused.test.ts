/**
 * `agentmesh run --nats` as a client whose NATS user may not ask the catalog (deploy/nats/nats.conf before the
 * client role got the catalog grants): the check before the run becomes a warning and the run is still submitted
 * and completes, instead of failing on the permissions violation.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freePort, startNatsServer, type NatsServerHandle } from './helpers/nats-server.js';
import { DEPLOY_NATS_CONF, deployPasswords, deployUserEnv, type DeployUser } from './helpers/deploy-nats.js';
import { runAgentmesh, startActor, type ActorProcess } from './helpers/cli.js';

const passwords = deployPasswords();

let nats: NatsServerHandle;
let dir: string;
const actors: ActorProcess[] = [];
const as = (user: DeployUser, extra: Record<string, string> = {}) =>
  deployUserEnv(nats.url, user, passwords[user], extra);

/** deploy/nats/nats.conf with the client's catalog grants taken out. */
function confWithoutClientCatalog(): string {
  const conf = readFileSync(DEPLOY_NATS_CONF, 'utf8');
  const start = conf.indexOf('CLIENT_PERMISSIONS = {');
  const end = conf.indexOf('\n}\n', start);
  const block = conf.slice(start, end).replace(/^\s*"agentmesh\.catalog\.(list|get|search)",\n/gm, '');
  expect(block).not.toContain('agentmesh.catalog');
  return conf.slice(0, start) + block + conf.slice(end);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agentmesh-old-conf-'));
  const conf = join(dir, 'nats.conf');
  writeFileSync(conf, confWithoutClientCatalog());
  nats = await startNatsServer({ configFile: conf, extraArgs: ['-m', String(await freePort())] });
  actors.push(await startActor(['catalog'], as('catalog', { AGENTMESH_CATALOG_ROLES: 'worker=*' })));
  actors.push(await startActor(['planner'], as('planner')));
  actors.push(await startActor(['worker'], as('worker', { AGENTMESH_WORKER_ROLE: 'worker' })));
}, 60_000);

afterAll(async () => {
  for (const a of actors.reverse()) await a.stop('SIGKILL');
  await nats?.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it('run --nats warns that the catalog check was refused, then submits and completes the run', async () => {
  const r = await runAgentmesh(['run', '--script', 'examples/add.json', 'add 2 and 3'], {
    env: as('client'),
    timeoutMs: 60_000,
  });
  expect(r.stderr).toMatch(
    /agentmesh run: warning: NATS refused this user the catalog check \(agentmesh\.catalog\.list\): submitting without it/,
  );
  expect(r.code, r.stderr).toBe(0);
  expect(r.stdout).toContain('2 + 3 = 5');
});
