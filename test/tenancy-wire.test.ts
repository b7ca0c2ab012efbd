/**
 * Issue 33, tenancy on the wire: a fleet (catalog, planner, worker, each on its deploy user) on a nats-server running
 * deploy/nats/nats.conf with its two example tenants. Tenant globex's credentials try everything on tenant acme's runs
 * and sessions: NATS refuses what is not globex's subject, and the planner answers globex's subjects about acme's runs
 * as about run ids nobody used. Each refusal has a positive control (acme itself, on the same subject shape) so that it
 * fails when the isolation is removed. Then acme runs end to end through the CLI with its own credentials.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PermissionViolationError } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  NatsBus,
  TenantHistoryReplySchema,
  TenantPendingReplySchema,
  TenantRunShowReplySchema,
  TenantRunsListReplySchema,
  TenantSessionShowReplySchema,
  TenantSessionsListReplySchema,
  requestJson,
  tenantSubjects,
  type RunEvent,
} from '@agentmesh/protocol';
import { followTenantRun, submitAsTenant, submitRun } from '@agentmesh/planner';
import { freePort, startNatsServer, type NatsServerHandle } from './helpers/nats-server.js';
import { DEPLOY_NATS_CONF, deployPasswords, deployUserEnv, type DeployUser } from './helpers/deploy-nats.js';
import { runAgentmesh, startActor, type ActorProcess } from './helpers/cli.js';

const passwords = deployPasswords();
const enc = new TextEncoder();
let nats: NatsServerHandle;
let dir: string;
const actors: ActorProcess[] = [];
const buses: NatsBus[] = [];

interface TenantConnection {
  bus: NatsBus;
  violations: PermissionViolationError[];
}
let acme: TenantConnection;
let globex: TenantConnection;
let client: NatsBus;

const as = (user: DeployUser, extra: Record<string, string> = {}) =>
  deployUserEnv(nats.url, user, passwords[user], extra);

async function connectAs(user: DeployUser): Promise<TenantConnection> {
  const bus = await NatsBus.connect(nats.url, {
    user,
    pass: passwords[user],
    name: `test-${user}`,
    requireJetStream: false,
  });
  buses.push(bus);
  const violations: PermissionViolationError[] = [];
  void (async () => {
    for await (const s of bus.nc.status())
      if (s.type === 'error' && s.error instanceof PermissionViolationError) violations.push(s.error);
  })();
  return { bus, violations };
}

/** Resolves with the first event of `runId` that matches, followed through acme's own tenant API. */
async function eventOf(
  tenant: TenantConnection,
  name: string,
  runId: string,
  match: (e: RunEvent) => boolean,
): Promise<RunEvent> {
  const stop = new AbortController();
  return new Promise<RunEvent>((resolve, reject) => {
    followTenantRun(tenant.bus, runId, {
      tenant: name,
      signal: stop.signal,
      onEvent: (e) => {
        if (!match(e)) return;
        resolve(e);
        stop.abort();
      },
    }).then(
      (final) => reject(new Error(`run ${runId} ended (${final.type}) before the awaited event`)),
      (error: unknown) => {
        if (!stop.signal.aborted) reject(error as Error);
      },
    );
  });
}

async function waitForViolation(c: TenantConnection, operation: string, subject: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!c.violations.some((v) => v.operation === operation && v.subject === subject)) {
    if (Date.now() > deadline) throw new Error(`no ${operation} violation on ${subject}`);
    await c.bus.nc.flush();
  }
}

async function expectPublishRefused(c: TenantConnection, subject: string): Promise<void> {
  c.bus.nc.publish(subject, enc.encode('{}'));
  await waitForViolation(c, 'publish', subject);
}

async function expectSubscribeRefused(c: TenantConnection, subject: string): Promise<void> {
  const sub = c.bus.nc.subscribe(subject);
  const closed = await Promise.race([
    sub.closed,
    new Promise<'still open'>((r) => setTimeout(() => r('still open'), 10_000)),
  ]);
  expect(closed, `subscription to ${subject}`).toBeInstanceOf(PermissionViolationError);
}

/** A request on `tenant`'s API; resolves with the reply or the error it carried. */
function ask(c: TenantConnection, subject: string, body: unknown): Promise<unknown> {
  return requestJson(c.bus, subject, body, z.unknown(), { timeoutMs: 15_000 }).catch(
    (error: unknown) => error,
  );
}

/**
 * Follows a run of `tenant` to its end, then until its record says finished: the session and transcript are saved
 * before the record is (the final event comes first).
 */
async function finished(c: TenantConnection, tenant: string, runId: string): Promise<RunEvent> {
  const final = await followTenantRun(c.bus, runId, { tenant });
  const deadline = Date.now() + 30_000;
  for (;;) {
    const shown = await requestJson(
      c.bus,
      tenantSubjects('agentmesh', tenant).run(runId, 'show'),
      {},
      TenantRunShowReplySchema,
      { timeoutMs: 10_000 },
    );
    if (shown.record.state === 'finished') return final;
    if (Date.now() > deadline) throw new Error(`the record of ${runId} did not finish`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const ACME = () => tenantSubjects('agentmesh', 'acme');
const GLOBEX = () => tenantSubjects('agentmesh', 'globex');

let approvalId: string;

beforeAll(async () => {
  nats = await startNatsServer({ configFile: DEPLOY_NATS_CONF, extraArgs: ['-m', String(await freePort())] });
  dir = mkdtempSync(join(tmpdir(), 'agentmesh-tenancy-'));
  writeFileSync(join(dir, 'planner.yaml'), 'approvals:\n  require: [crypto.sha256]\n');
  const sha = {
    turns: [
      { text: 'Fingerprinting.', tool_calls: [{ name: 'crypto.sha256', arguments: { text: 'acme-build' } }] },
      { text: 'Fingerprinted.' },
    ],
  };
  writeFileSync(join(dir, 'sha.json'), JSON.stringify(sha));
  actors.push(await startActor(['catalog'], as('catalog', { AGENTMESH_CATALOG_ROLES: 'worker=*' })));
  actors.push(await startActor(['planner', '--config', join(dir, 'planner.yaml')], as('planner')));
  actors.push(await startActor(['worker'], as('worker', { AGENTMESH_WORKER_ROLE: 'worker' })));
  acme = await connectAs('tenant_acme');
  globex = await connectAs('tenant_globex');
  client = await NatsBus.connect(nats.url, { user: 'client', pass: passwords.client, name: 'test-client' });
  buses.push(client);

  // acme: a finished run in session acme-s, a run waiting on approval, a daemon waiting for triggers
  const add = (JSON.parse(readFileSync('examples/add.json', 'utf8')) as { turns: object[] }).turns;
  await submitAsTenant(acme.bus, 'acme', {
    id: 'acme-done',
    task: 'acme secret: add 2 and 3',
    session: 'acme-s',
    script: add as never,
  });
  const done = await finished(acme, 'acme', 'acme-done');
  expect(done).toMatchObject({ type: 'run.completed', status: 'done' });
  const asked = eventOf(acme, 'acme', 'acme-wait', (e) => e.type === 'approval.requested');
  await submitAsTenant(acme.bus, 'acme', {
    id: 'acme-wait',
    task: 'fingerprint',
    script: sha.turns as never,
  });
  approvalId = ((await asked) as Extract<RunEvent, { type: 'approval.requested' }>).approval_id;
  const daemon = (JSON.parse(readFileSync('examples/daemon.json', 'utf8')) as { turns: object[] }).turns;
  const idle = eventOf(acme, 'acme', 'acme-daemon', (e) => e.type === 'daemon.idle');
  await submitAsTenant(acme.bus, 'acme', {
    id: 'acme-daemon',
    task: 'fingerprint builds',
    daemon: {},
    script: daemon as never,
  });
  await idle;
}, 180_000);

afterAll(async () => {
  for (const b of buses) await b.close().catch(() => undefined);
  for (const a of actors.reverse()) await a.stop('SIGKILL');
  await nats?.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("tenant globex's credentials against tenant acme", { timeout: 120_000 }, () => {
  it('cannot submit for acme: a body naming acme is refused naming both tenants; acme subjects are refused', async () => {
    const refused = await submitAsTenant(globex.bus, 'globex', {
      id: 'globex-claims-acme',
      task: 'pretend to be acme',
      identity: { tenant: 'acme' },
      script: [{ text: 'hi' }],
    }).catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'permission_denied' });
    expect((refused as Error).message).toMatch(/"acme".*"globex"/);
    expect(
      await requestJson(acme.bus, ACME().run('globex-claims-acme', 'show'), {}, TenantRunShowReplySchema, {
        timeoutMs: 10_000,
      }).catch((error: unknown) => error),
    ).toMatchObject({ code: 'not_found' });
    await expectPublishRefused(globex, ACME().runsSubmit);
    await expectPublishRefused(globex, 'agentmesh.runs.submit');
    // no JetStream at all: the run stream cannot be written directly either
    await expectPublishRefused(globex, '$JS.API.INFO');
  });

  it("cannot read acme's events: no subscription to them, and history of acme's run through globex is not_found", async () => {
    await expectSubscribeRefused(globex, ACME().runEvents('acme-done'));
    await expectSubscribeRefused(globex, 'agentmesh.runs.*.events');
    await expectSubscribeRefused(globex, 'agentmesh.tenant.*.runs.*.events');
    const history = (subject: string, c: TenantConnection) =>
      requestJson(c.bus, subject, {}, TenantHistoryReplySchema, { timeoutMs: 10_000 }).catch(
        (e: unknown) => e,
      );
    expect(await history(GLOBEX().run('acme-done', 'history'), globex)).toMatchObject({ code: 'not_found' });
    const own = await history(ACME().run('acme-done', 'history'), acme);
    expect(JSON.stringify(own)).toContain('2 + 3 = 5');
  });

  it("cannot read acme's records or transcripts: show is not_found, runs list has only globex's runs, KV refused", async () => {
    const show = (c: TenantConnection, subject: string) =>
      requestJson(c.bus, subject, {}, TenantRunShowReplySchema, { timeoutMs: 10_000 }).catch(
        (e: unknown) => e,
      );
    const missing = await show(globex, GLOBEX().run('acme-done', 'show'));
    const unknown = await show(globex, GLOBEX().run('no-such-run', 'show'));
    expect(missing).toMatchObject({ code: 'not_found' });
    // the same answer as for a run id nobody used, up to the id: no existence oracle
    expect((missing as Error).message.replace('acme-done', 'X')).toBe(
      (unknown as Error).message.replace('no-such-run', 'X'),
    );
    expect(await show(acme, ACME().run('acme-done', 'show'))).toMatchObject({
      record: { run_id: 'acme-done', state: 'finished' },
      transcript: { status: 'done' },
    });
    await expectPublishRefused(globex, '$JS.API.DIRECT.GET.KV_agentmesh_runs.acme-done');
    await expectPublishRefused(globex, '$JS.API.STREAM.MSG.GET.AGENTMESH_EVENTS');
    await expectPublishRefused(globex, '$O.agentmesh_transcripts.M.acme-done');
  });

  it('runs list shows each tenant only its own runs', async () => {
    await submitAsTenant(globex.bus, 'globex', {
      id: 'globex-own',
      task: 'a globex run',
      script: [{ text: 'globex done' }],
    });
    await finished(globex, 'globex', 'globex-own');
    const list = async (c: TenantConnection, subject: string) =>
      (await requestJson(c.bus, subject, {}, TenantRunsListReplySchema, { timeoutMs: 10_000 })).runs.map(
        (r) => r.run_id,
      );
    const globexRuns = await list(globex, GLOBEX().runsList);
    const acmeRuns = await list(acme, ACME().runsList);
    expect(globexRuns).toEqual(['globex-own']);
    expect(acmeRuns).toEqual(expect.arrayContaining(['acme-done', 'acme-wait', 'acme-daemon']));
    expect(acmeRuns).not.toContain('globex-own');
  });

  it("cannot read, fork or delete acme's sessions; a globex run in a session of the same name starts fresh", async () => {
    const sessions = async (c: TenantConnection, subject: string) =>
      (
        await requestJson(c.bus, subject, {}, TenantSessionsListReplySchema, { timeoutMs: 10_000 })
      ).sessions.map((s) => s.session);
    expect(await sessions(acme, ACME().sessions('list'))).toContain('acme-s');
    expect(await sessions(globex, GLOBEX().sessions('list'))).not.toContain('acme-s');
    for (const [verb, body] of [
      ['show', { session: 'acme-s' }],
      ['fork', { session: 'acme-s', to: 'stolen' }],
      ['delete', { session: 'acme-s' }],
    ] as const)
      expect(await ask(globex, GLOBEX().sessions(verb), body), verb).toMatchObject({ code: 'not_found' });
    const acmeSession = await requestJson(
      acme.bus,
      ACME().sessions('show'),
      { session: 'acme-s' },
      TenantSessionShowReplySchema,
      { timeoutMs: 10_000 },
    );
    expect(JSON.stringify(acmeSession)).toContain('acme secret');

    // a trusted submitter naming globex, and globex itself, continue "acme-s" of globex: none of acme's turns
    await submitRun(client, {
      id: 'trusted-globex',
      task: 'trusted on behalf of globex',
      session: 'acme-s',
      identity: { tenant: 'globex' },
      script: [{ text: 'trusted done' }],
    });
    await finished(globex, 'globex', 'trusted-globex');
    const globexSession = await requestJson(
      globex.bus,
      GLOBEX().sessions('show'),
      { session: 'acme-s' },
      TenantSessionShowReplySchema,
      { timeoutMs: 10_000 },
    );
    expect(globexSession.session.runs).toEqual(['trusted-globex']);
    expect(JSON.stringify(globexSession)).not.toContain('acme secret');
    await expectPublishRefused(globex, '$KV.agentmesh_session_index.index.acme.acme-s');
  });

  it("cannot see or decide acme's approvals", async () => {
    const pending = async (c: TenantConnection, subject: string) =>
      (await requestJson(c.bus, subject, {}, TenantPendingReplySchema, { timeoutMs: 10_000 })).pending.map(
        (p) => p.approval_id,
      );
    expect(await pending(acme, ACME().runsPending)).toContain(approvalId);
    expect(await pending(globex, GLOBEX().runsPending)).not.toContain(approvalId);
    for (const decision of ['approve', 'deny'] as const)
      expect(
        await ask(globex, GLOBEX().run('acme-wait', 'approve'), {
          approval_id: approvalId,
          decision,
          by: 'globex',
        }),
        decision,
      ).toMatchObject({ code: 'not_found' });
    expect(await pending(acme, ACME().runsPending)).toContain(approvalId);
    await expectPublishRefused(globex, 'agentmesh.runs.acme-wait.approve');
    await expectPublishRefused(globex, ACME().run('acme-wait', 'approve'));
  });

  it('cannot send input to, pause, resume, trigger or cancel acme runs; acme can, on the same subjects of its own', async () => {
    const controls = [
      ['input', { text: 'globex was here' }],
      ['pause', {}],
      ['resume', {}],
      ['trigger', { kind: 'build', build: 9 }],
      ['cancel', { reason: 'globex' }],
    ] as const;
    for (const [verb, body] of controls) {
      expect(await ask(globex, GLOBEX().run('acme-daemon', verb), body), verb).toMatchObject({
        code: 'not_found',
      });
      await expectPublishRefused(globex, `agentmesh.runs.acme-daemon.${verb}`);
      await expectPublishRefused(globex, ACME().run('acme-daemon', verb));
    }
    const record = await requestJson(
      acme.bus,
      ACME().run('acme-daemon', 'show'),
      {},
      TenantRunShowReplySchema,
      {
        timeoutMs: 10_000,
      },
    );
    expect(record.record).toMatchObject({ state: 'running' });
    expect(record.record['cancel_requested']).toBeUndefined();
    // the positive control: acme's own requests on the same shapes are answered
    for (const [verb, body] of controls.slice(0, 4))
      expect(await ask(acme, ACME().run('acme-daemon', verb), body), verb).toMatchObject({ ok: true });
    expect(await ask(acme, ACME().run('acme-daemon', 'cancel'), { reason: 'test over' })).toMatchObject({
      cancelled: true,
    });
  });

  it("acme's child runs are acme's: their events reach acme's mirror, and globex cannot read them", async () => {
    const mirrored: RunEvent[] = [];
    const sub = acme.bus.subscribe(ACME().allRunEvents, (msg) => {
      mirrored.push(JSON.parse(msg.text()) as RunEvent);
    });
    await acme.bus.flush();
    try {
      const started = eventOf(acme, 'acme', 'acme-parent', (e) => e.type === 'agent.started');
      await submitAsTenant(acme.bus, 'acme', {
        id: 'acme-parent',
        task: 'delegate',
        tools: ['agent'],
        script: [
          {
            tool_calls: [
              {
                id: 'c1',
                name: 'agent__run',
                arguments: { task: 'child', script: [{ text: 'child answer' }] },
              },
            ],
          },
          { text: 'parent done' },
        ],
      });
      const childId = ((await started) as Extract<RunEvent, { type: 'agent.started' }>).child_run_id;
      expect(await finished(acme, 'acme', 'acme-parent')).toMatchObject({ status: 'done' });
      await finished(acme, 'acme', childId);
      expect(mirrored.filter((e) => e.run_id === childId).map((e) => e.type)).toContain('run.completed');
      expect(
        await requestJson(globex.bus, GLOBEX().run(childId, 'history'), {}, TenantHistoryReplySchema, {
          timeoutMs: 10_000,
        }).catch((e: unknown) => e),
      ).toMatchObject({ code: 'not_found' });
    } finally {
      sub.unsubscribe();
    }
  });

  it("cannot make the planner answer onto acme's subjects: a reply subject that is no inbox is refused", async () => {
    const target = ACME().runEvents('acme-wait');
    const landed: string[] = [];
    const sub = acme.bus.subscribe(target, (msg) => {
      landed.push(msg.text());
    });
    await acme.bus.flush();
    const planner = actors[1]!;
    try {
      for (const reply of [target, 'agentmesh.runs.acme-wait.cancel'])
        globex.bus.nc.publish(GLOBEX().runsList, enc.encode('{}'), { reply });
      await globex.bus.nc.flush();
      const deadline = Date.now() + 30_000;
      while ((planner.logs().match(/reply subject is not an inbox/g) ?? []).length < 2) {
        if (Date.now() > deadline)
          throw new Error(`the planner did not refuse the reply subjects:\n${planner.logs()}`);
        await acme.bus.flush();
      }
      await acme.bus.flush();
      expect(landed).toEqual([]);
      const shown = await requestJson(
        acme.bus,
        ACME().run('acme-wait', 'show'),
        {},
        TenantRunShowReplySchema,
        {
          timeoutMs: 10_000,
        },
      );
      expect(shown.record).toMatchObject({ state: 'running', waiting: 'awaiting_approval' });
    } finally {
      sub.unsubscribe();
    }
  });

  it('cannot fetch artifacts: the artifact subjects and object store are not granted', async () => {
    await expectPublishRefused(globex, 'agentmesh.artifacts.fetch');
    await expectPublishRefused(globex, '$O.agentmesh_artifacts.M.any');
    await expectPublishRefused(globex, 'agentmesh.catalog.list');
  });
});

describe('tenant acme end to end through the CLI, with its own credentials', { timeout: 240_000 }, () => {
  it('run --tenant acme waits for approval, runs approve --tenant acme lets it finish; list, sessions, tools', async () => {
    const env = as('tenant_acme', { AGENTMESH_TENANT: 'acme' });
    const run = await startActor(
      [
        'run',
        '--id',
        'acme-cli',
        '--session',
        'acme-cli-s',
        '--script',
        join(dir, 'sha.json'),
        'fingerprint it',
      ],
      { ...env, LOG_LEVEL: 'warn' },
      /waits for approval \S+/,
    );
    actors.push(run);
    const id = /waits for approval (\S+)/.exec(run.logs())![1]!;
    const cli = (args: string[]) => runAgentmesh(args, { env, timeoutMs: 60_000 });
    expect((await cli(['runs', 'pending'])).stdout).toMatch(
      new RegExp(`acme-cli\\s+${id}\\s+crypto\\.sha256`),
    );
    const approved = await cli(['runs', 'approve', 'acme-cli', id, '--tenant', 'acme']);
    expect(approved.code, approved.stderr).toBe(0);
    const code = await new Promise<number | null>((resolve) =>
      run.child.exitCode !== null ? resolve(run.child.exitCode) : run.child.once('exit', resolve),
    );
    expect(code, run.logs()).toBe(0);
    expect(run.logs()).toContain('Fingerprinted.');
    expect(run.logs()).not.toMatch(/permission/i);
    await finished(acme, 'acme', 'acme-cli');
    const listed = await cli(['runs', 'list']);
    expect(listed.stdout).toMatch(/acme-cli\s+done/);
    expect(listed.stdout).not.toContain('globex-own');
    expect((await cli(['runs', 'show', 'acme-cli'])).stdout).toContain('Fingerprinted.');
    // the decision records which tenant made it, whatever `by` the client sent
    const shown = JSON.parse((await cli(['runs', 'show', 'acme-cli', '--json'])).stdout) as {
      events: RunEvent[];
    };
    expect(shown.events.find((e) => e.type === 'approval.decided')).toMatchObject({
      by: expect.stringMatching(/^tenant acme: cli:/) as unknown,
    });
    expect((await cli(['runs', 'watch', 'acme-cli'])).stdout).toContain('Fingerprinted.');
    expect((await cli(['sessions', 'list'])).stdout).toMatch(/acme-cli-s\s+1 run/);
    expect((await cli(['sessions', 'show', 'acme-cli-s'])).stdout).toContain('user: fingerprint it');
    expect((await cli(['tools', 'list'])).stdout).toContain('crypto.sha256');
    // ops reads any tenant's views through the tenant API; the trusted client may use it too
    for (const [user, args, expected] of [
      ['ops', ['runs', 'list', '--tenant', 'acme'], /acme-cli\s+done/],
      ['ops', ['sessions', 'list', '--tenant', 'acme'], /acme-cli-s\s+1 run/],
      ['ops', ['runs', 'watch', 'acme-cli', '--tenant', 'acme'], /Fingerprinted\./],
      ['client', ['runs', 'show', 'acme-cli', '--tenant', 'acme'], /Fingerprinted\./],
    ] as const) {
      const r = await runAgentmesh([...args], { env: as(user), timeoutMs: 60_000 });
      expect(`${r.stdout}${r.stderr}`, `${user}: ${args.join(' ')}`).not.toMatch(/permission/i);
      expect(r.stdout, `${user}: ${args.join(' ')}`).toMatch(expected);
    }
    // globex's CLI does not see acme's run
    const other = await runAgentmesh(['runs', 'show', 'acme-cli', '--tenant', 'globex'], {
      env: as('tenant_globex'),
      timeoutMs: 60_000,
    });
    expect(other.code).toBe(1);
    expect(other.stderr).toContain('no run "acme-cli" is known for tenant "globex"');
  });

  it('tenants add prints the entry deploy/nats/nats.conf carries, and a strong password unless told the variable', async () => {
    const conf = readFileSync(DEPLOY_NATS_CONF, 'utf8');
    for (const tenant of ['acme', 'globex']) {
      const r = await runAgentmesh([
        'tenants',
        'add',
        tenant,
        '--password-env',
        `NATS_TENANT_${tenant.toUpperCase()}_PASSWORD`,
        '--json',
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(conf).toContain((JSON.parse(r.stdout) as { entry: string }).entry);
    }
    const fresh = await runAgentmesh(['tenants', 'add', 'initech']);
    expect(fresh.stdout).toMatch(/user: "tenant_initech", password: "p[0-9a-f]{48}"/);
    expect(fresh.stdout).toContain('NATS_USER=tenant_initech');
    expect(fresh.stdout).toContain('--tenant initech');
    const bad = await runAgentmesh(['tenants', 'add', 'Not.Valid']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('not valid');
  });
});
