/**
 * Every CLI command docs/deploy.md documents for the `client` and `ops` NATS users, run as those users against a
 * nats-server on deploy/nats/nats.conf, with a catalog, a planner and a worker on their own deploy users: each
 * command exits 0 and no output names a permissions violation. A grant the CLI needs and the config lacks (or a
 * CLI change that needs a new grant) fails here.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startNatsServer, type NatsServerHandle } from './helpers/nats-server.js';
import { DEPLOY_NATS_CONF, deployPasswords, deployUserEnv, type DeployUser } from './helpers/deploy-nats.js';
import { runAgentmesh, startActor, type ActorProcess, type CliResult } from './helpers/cli.js';

const passwords = deployPasswords();

let nats: NatsServerHandle;
let dir: string;
const actors: ActorProcess[] = [];
const as = (user: DeployUser, extra: Record<string, string> = {}) =>
  deployUserEnv(nats.url, user, passwords[user], extra);

/** Runs `agentmesh ARGS` as `user`; expects exit 0 and no permissions violation anywhere in its output. */
async function ok(user: 'client' | 'ops', args: string[]): Promise<CliResult> {
  const r = await runAgentmesh(args, { env: as(user), timeoutMs: 60_000 });
  const output = `${r.stdout}\n${r.stderr}`;
  expect(output, `${user}: agentmesh ${args.join(' ')}`).not.toMatch(/permission/i);
  expect(r.code, `${user}: agentmesh ${args.join(' ')}\n${output}`).toBe(0);
  return r;
}

/** `agentmesh run` as the client, left running until its output matches `until`. */
function startRun(args: string[], until: RegExp): Promise<ActorProcess> {
  return startActor(['run', ...args], as('client', { LOG_LEVEL: 'warn' }), until).then((run) => {
    actors.push(run);
    return run;
  });
}

function exited(run: ActorProcess): Promise<number | null> {
  const { child } = run;
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', resolve));
}

beforeAll(async () => {
  nats = await startNatsServer({ configFile: DEPLOY_NATS_CONF, extraArgs: ['-m', String(await freePort())] });
  dir = mkdtempSync(join(tmpdir(), 'agentmesh-roles-'));
  // the planner asks for approval before crypto.sha256 (the script of a run that calls it below), and counts the
  // default tenant's tokens against a daily budget (in the tenant usage bucket)
  writeFileSync(
    join(dir, 'planner.yaml'),
    'approvals:\n  require: [crypto.sha256]\ntenants:\n  default: { daily_tokens: 100000000 }\n',
  );
  writeFileSync(
    join(dir, 'sha.json'),
    JSON.stringify({
      turns: [
        { text: 'Fingerprinting.', tool_calls: [{ name: 'crypto.sha256', arguments: { text: 'build-1' } }] },
        { text: 'Done.' },
      ],
    }),
  );
  actors.push(await startActor(['catalog'], as('catalog', { AGENTMESH_CATALOG_ROLES: 'worker=*' })));
  actors.push(await startActor(['planner', '--config', join(dir, 'planner.yaml')], as('planner')));
  actors.push(await startActor(['worker'], as('worker', { AGENTMESH_WORKER_ROLE: 'worker' })));
}, 60_000);

afterAll(async () => {
  for (const a of actors.reverse()) await a.stop('SIGKILL');
  await nats?.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the documented commands of each role, under deploy/nats/nats.conf', () => {
  it('client: run --nats (its catalog check included), tools list and search', async () => {
    const run = await ok('client', [
      'run',
      '--id',
      'role-run',
      '--script',
      'examples/add.json',
      'add 2 and 3',
    ]);
    expect(run.stdout).toContain('2 + 3 = 5');
    expect(run.stderr).not.toMatch(/warning/);
    expect((await ok('client', ['tools', 'list'])).stdout).toContain('math.calc');
    expect((await ok('client', ['tools', 'search', 'add two numbers'])).stdout).toContain('math.calc');
  });

  it('client: runs approve and runs deny decide a run that waits on approval; ops: runs pending lists it', async () => {
    for (const decision of ['approve', 'deny'] as const) {
      const id = `role-${decision}`;
      const run = await startRun(
        ['--id', id, '--script', join(dir, 'sha.json'), 'fingerprint build-1'],
        /waits for approval \S+/,
      );
      const approvalId = /waits for approval (\S+)/.exec(run.logs())![1]!;
      expect((await ok('ops', ['runs', 'pending'])).stdout).toMatch(
        new RegExp(`${id}\\s+${approvalId}\\s+crypto\\.sha256`),
      );
      await ok('client', ['runs', decision, id, approvalId, '--reason', 'role test']);
      expect(await exited(run), run.logs()).toBe(0);
      expect(run.logs()).not.toMatch(/permission/i);
    }
  });

  it('client: runs input, pause, resume and trigger steer a daemon run; ops: runs list, show, cancel, trigger', async () => {
    const id = 'role-daemon';
    const daemon = await startRun(
      ['--daemon', '--id', id, '--script', 'examples/daemon.json', 'fingerprint builds'],
      /Waiting for build triggers/,
    );
    await ok('client', ['runs', 'input', id, 'a new build is out']);
    await ok('client', ['runs', 'pause', id]);
    await ok('client', ['runs', 'resume', id]);
    await ok('client', ['runs', 'trigger', id, '--kind', 'build', '--data', '{"build":2}']);
    await ok('ops', ['runs', 'trigger', id, '--kind', 'build', '--data', '{"build":3}']);
    expect((await ok('ops', ['runs', 'list'])).stdout).toContain(id);
    expect((await ok('ops', ['runs', 'show', 'role-run'])).stdout).toContain('2 + 3 = 5');
    expect((await ok('ops', ['runs', 'cancel', id, '--reason', 'role test'])).stdout).toContain(
      `cancel sent to run ${id}`,
    );
    await exited(daemon);
    expect(daemon.logs()).not.toMatch(/permission/i);
  });

  it('client: run --session; ops: sessions list and show', async () => {
    await ok('client', ['run', '--session', 'role-s1', '--script', 'examples/add.json', 'add 2 and 3']);
    expect((await ok('ops', ['sessions', 'list'])).stdout).toMatch(/role-s1\s+1 run/);
    expect((await ok('ops', ['sessions', 'show', 'role-s1'])).stdout).toContain('user: add 2 and 3');
  });

  it('what a role is not given stays refused: ops cannot delete a session, the client cannot list runs', async () => {
    for (const [user, args] of [
      ['ops', ['sessions', 'delete', 'role-s1']],
      ['client', ['runs', 'list']],
    ] as const) {
      const r = await runAgentmesh([...args], { env: as(user), timeoutMs: 60_000 });
      expect(r.code, `${user}: ${args.join(' ')}`).not.toBe(0);
      expect(r.stderr).toMatch(/permissions violation/i);
    }
  });

  it('ops: status, tools list and search', async () => {
    const status = await ok('ops', ['status']);
    expect(status.stdout).toMatch(/actors: .*1 catalog/);
    expect(status.stdout).toMatch(/1 tool-worker/);
    expect((await ok('ops', ['status', '--json'])).stdout).toMatch(/"tools":\d+/);
    expect((await ok('ops', ['tools', 'list'])).stdout).toContain('math.calc');
    expect((await ok('ops', ['tools', 'search', 'add two numbers'])).stdout).toContain('math.calc');
  });

  it("ops: tenants usage reads the tenants' usage today that the planner counted", async () => {
    const usage = await ok('ops', ['tenants', 'usage', '--json', '--config', join(dir, 'planner.yaml')]);
    const [row] = JSON.parse(usage.stdout) as { tenant: string; tokens: number; turns: number }[];
    expect(row).toMatchObject({ tenant: 'default', limits: { daily_tokens: 100000000 } });
    expect(row!.turns).toBeGreaterThan(0);
    expect((await ok('ops', ['tenants', 'usage'])).stdout).toMatch(/default\s+\d+ \(no limit\)/);
  });
});
