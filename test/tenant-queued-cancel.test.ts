/**
 * Cancel of a run waiting in its tenant's queue (fair intake, real nats-server, 2 planners): the run ends cancelled at
 * once, never starts (no run.started, no tool call), leaves the tenant's `max_queued_runs` count and its queued count
 * (`agentmesh status`, the `agentmesh_tenant_queued_runs` gauge: its message is deleted from the queue), and the next
 * run starts in its place once the running one ends. Cancel twice answers like a finished run; another tenant's cancel
 * is `not_found`; the tenant API and a plain publish on `runs.<id>.cancel` cancel a waiting run too. A run queued by
 * an older planner (`run.queued` without `submit_seq`) cancels as before: its message stays until a planner drops it.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  RunEventSchema,
  TenantCancelReplySchema,
  createActorMetrics,
  encodeJson,
  isAgentMeshError,
  openRunEventLog,
  openRunIntake,
  parseJson,
  requestJson,
  setProcessMetrics,
  subjects,
  tenantSubjects,
  type RunEvent,
  type Subscription,
} from '@agentmesh/protocol';
import {
  cancelRun,
  cancelTookEffect,
  openRunRecords,
  readRunEvents,
  sendApprovalDecision,
  submitRun,
  tenantWaitingBucket,
} from '@agentmesh/planner';
import { cleanEnv, runAgentmesh, type CliResult } from './helpers/cli.js';
import { startDeployFleet } from './helpers/deploy-nats.js';
import { startNatsFleet, type NatsFleet } from './helpers/fleet.js';
import { EventBoard, until, waitForRunEnd, waitForRunEvent } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
const TIMEOUT_MS = 60_000;
const TENANT = 'capped';

let fleet: NatsFleet | undefined;
let sub: Subscription | undefined;
const metrics = createActorMetrics('planner');

beforeAll(() => setProcessMetrics(metrics));

/** The tenant's queued count in `agentmesh status --json` (`tenants: [{tenant, queued, running}]`). */
async function statusQueued(run: Promise<CliResult>, tenant: string): Promise<number | undefined> {
  const result = await run;
  expect(result.stderr).toBe('');
  const status = JSON.parse(result.stdout) as { tenants: { tenant: string; queued: number }[] };
  return status.tenants.find((t) => t.tenant === tenant)?.queued;
}

/** The planners' `agentmesh_tenant_queued_runs` gauge of `tenant`. */
async function queuedGauge(tenant: string): Promise<number | undefined> {
  const line = new RegExp(`^agentmesh_tenant_queued_runs\\{[^}]*tenant="${tenant}"[^}]*\\} (\\d+)$`, 'm');
  const found = line.exec(await metrics.scrape());
  return found === null ? undefined : Number(found[1]);
}

afterAll(async () => {
  sub?.unsubscribe();
  await fleet?.stop();
}, 60_000);

describe('cancel of a queued run (fair intake, 2 planners)', () => {
  it('ends it at once, never starts it, frees its queue place, and the next run starts after the running one', async () => {
    const f = (fleet = await startNatsFleet(natsUrl, { prefixTag: 'tqc' }));
    const board = new EventBoard();
    const all: RunEvent[] = [];
    sub = f.client.subscribe(subjects(f.prefix).allRunEvents, (msg) => {
      const event = RunEventSchema.parse(JSON.parse(msg.text())) as RunEvent;
      all.push(event);
      board.add(event);
    });
    const tenants = { [TENANT]: { max_concurrent_runs: 1, max_queued_runs: 10 } };
    for (const n of ['a', 'b']) await f.planner(`${f.prefix}-${n}`, { tenants });
    const eventOf = (id: string, type: RunEvent['type']) =>
      board.until(`${type} of ${id}`, () => board.of(id).find((e) => e.type === type), {
        timeoutMs: TIMEOUT_MS,
      });
    const submit = (id: string, extra: Record<string, unknown> = {}) =>
      submitRun(
        f.client,
        {
          id,
          task: 'queued cancel',
          tool_search: 'off',
          identity: { tenant: TENANT },
          script: [
            { tool_calls: [{ name: 'math.calc', arguments: { lhs: 1, rhs: 2, op: 'add' } }] },
            { text: 'done' },
          ],
          ...extra,
        },
        { prefix: f.prefix },
      );
    const waitingKv = await f.client.kv(tenantWaitingBucket(f.prefix));
    const waiting = async () => {
      const entry = await waitingKv.get(TENANT);
      return entry === null ? [] : (parseJson(entry.value, 'waiting') as { runs: string[] }).runs;
    };

    // the 1st run holds the tenant's only slot until the test approves its tool call
    await submit('qc-1', { approvals: { require: ['math.calc'] } });
    const requested = await eventOf('qc-1', 'approval.requested');
    for (const id of ['qc-2', 'qc-6', 'qc-3', 'qc-4', 'qc-5']) await submit(id);
    for (const id of ['qc-2', 'qc-6', 'qc-3', 'qc-4', 'qc-5']) await eventOf(id, 'run.queued');
    expect((await waiting()).sort()).toEqual(['qc-2', 'qc-3', 'qc-4', 'qc-5', 'qc-6']);
    for (const id of ['qc-2', 'qc-6', 'qc-3', 'qc-4', 'qc-5'])
      expect(board.of(id).find((e) => e.type === 'run.queued')).toMatchObject({
        submit_seq: expect.any(Number),
      });
    const status = () =>
      statusQueued(
        runAgentmesh(['status', '--json', '--nats', natsUrl, '--prefix', f.prefix], { env: cleanEnv() }),
        TENANT,
      );
    await until('5 runs queued in agentmesh status', async () => (await status()) === 5);

    // a run queued by an older planner: its run.queued has no submit_seq (events, then its message, as it stored them)
    const log = await openRunEventLog(f.client, f.prefix);
    const ts = new Date().toISOString();
    const oldEvents = [
      {
        type: 'run.accepted',
        run_id: 'qc-old',
        seq: 1,
        ts,
        task: 'queued cancel',
        identity: { tenant: TENANT },
      },
      { type: 'run.queued', run_id: 'qc-old', seq: 2, ts, tenant: TENANT, priority: 3, position: 6 },
    ];
    for (const e of oldEvents) await log.append(subjects(f.prefix).runEvents('qc-old'), e.seq, encodeJson(e));
    await (
      await openRunIntake(f.client, f.prefix)
    ).submit(
      encodeJson({
        id: 'qc-old',
        task: 'queued cancel',
        identity: { tenant: TENANT },
        script: [{ text: 'no' }],
      }),
      {
        dedupeId: 'q-qc-old',
        subject: subjects(f.prefix).queuedRuns(TENANT, 3),
        headers: { 'am-queued-at': String(Date.now()), 'am-queued-seq': '2' },
      },
    );
    await until('the older run queued too', async () => (await status()) === 6);

    // the operator's cancel (agentmesh runs cancel): a planner ends the waiting run and answers
    const cancelled = await cancelRun(f.client, 'qc-2', { prefix: f.prefix, reason: 'not needed' });
    expect(cancelled).toMatchObject({
      ...{ run_id: 'qc-2', state: 'finished', status: 'cancelled', queued: true },
      ...{ task: 'queued cancel', tenant: TENANT, cancel_requested: 'not needed' },
    });
    expect(cancelled?.accepted_at).toBe(board.of('qc-2')[0]!.ts);
    expect(cancelTookEffect(cancelled!)).toBe(true);
    expect(await eventOf('qc-2', 'run.completed')).toMatchObject({
      status: 'cancelled',
      reason: 'cancelled: not needed',
    });
    expect(board.of('qc-1').some((e) => e.type === 'run.completed')).toBe(false);
    expect((await waiting()).sort()).toEqual(['qc-3', 'qc-4', 'qc-5', 'qc-6']);
    // its message left the queue with the answer: no planner has room to take it (qc-1 holds the only slot)
    expect(await status()).toBe(5);
    await until('the queued gauge counts 5', async () => (await queuedGauge(TENANT)) === 5);

    // the older run cancels as before: answered and ended, its message counted until a planner takes and drops it
    expect(await cancelRun(f.client, 'qc-old', { prefix: f.prefix, reason: 'old' })).toMatchObject({
      ...{ run_id: 'qc-old', state: 'finished', status: 'cancelled', queued: true },
    });
    expect(await eventOf('qc-old', 'run.completed')).toMatchObject({
      status: 'cancelled',
      reason: 'cancelled: old',
    });
    expect(await status()).toBe(5);

    // again: the answer of a finished run, nothing else happens
    const again = await cancelRun(f.client, 'qc-2', { prefix: f.prefix });
    expect(again).toMatchObject({ state: 'finished', status: 'cancelled' });
    expect(again?.queued).toBeUndefined();
    expect(cancelTookEffect(again!)).toBe(false);

    // another tenant cannot cancel it, nor learn that it exists
    const ask = (tenant: string, runId: string) =>
      requestJson(
        f.client,
        tenantSubjects(f.prefix, tenant).run(runId, 'cancel'),
        { reason: 'mine' },
        TenantCancelReplySchema,
        { timeoutMs: 10_000 },
      );
    const refused = await ask('intruder', 'qc-3').catch((error: unknown) => error);
    expect(isAgentMeshError(refused, 'not_found')).toBe(true);
    const unknown = await ask('intruder', 'qc-nobody').catch((error: unknown) => error);
    expect((refused as Error).message.replace('qc-3', 'X')).toBe(
      (unknown as Error).message.replace('qc-nobody', 'X'),
    );
    expect(await waiting()).toContain('qc-3');

    // the tenant's own cancel through its API, and a plain publish on runs.<id>.cancel
    expect(await ask(TENANT, 'qc-4')).toEqual({
      run_id: 'qc-4',
      state: 'finished',
      cancelled: true,
      status: 'cancelled',
      queued: true,
    });
    expect(await status()).toBe(4);
    f.client.publish(subjects(f.prefix).runCancel('qc-5'), encodeJson({ reason: 'published' }));
    expect(await eventOf('qc-5', 'run.completed')).toMatchObject({ status: 'cancelled' });
    await until('qc-5 out of the waiting count', async () => !(await waiting()).includes('qc-5'));
    expect((await waiting()).sort()).toEqual(['qc-3', 'qc-6']);
    // left: qc-3, qc-6 and the older run (qc-6's record is made below, as by a canceller that stopped at once)
    await until('qc-5 out of the queued count', async () => (await status()) === 3);

    // a canceller that stopped right after its compare-and-set: the planner that takes the run stores its end
    const now = new Date().toISOString();
    await (
      await openRunRecords(f.client, f.prefix)
    ).create(
      'qc-6',
      encodeJson({
        ...{ schema_version: 1, run_id: 'qc-6', planner_id: 'gone', state: 'finished', status: 'cancelled' },
        ...{ accepted_at: now, finished_at: now, tenant: TENANT, cancel_requested: 'its planner died' },
      }),
    );

    await sendApprovalDecision(
      f.client,
      'qc-1',
      { approval_id: (requested as { approval_id: string }).approval_id, decision: 'approve', by: 'test' },
      { prefix: f.prefix },
    );
    expect(await eventOf('qc-3', 'run.completed')).toMatchObject({ status: 'done' });
    expect(await eventOf('qc-6', 'run.completed')).toMatchObject({
      status: 'cancelled',
      reason: 'cancelled: its planner died',
    });
    const index = (id: string, type: RunEvent['type']) =>
      all.findIndex((e) => e.run_id === id && e.type === type);
    expect(index('qc-3', 'run.started')).toBeGreaterThan(index('qc-1', 'run.completed'));
    expect(await waiting()).toEqual([]);
    await eventOf('qc-old', 'run.completed');
    await until('nothing queued', async () => ((await status()) ?? 0) === 0);

    for (const id of ['qc-2', 'qc-4', 'qc-5', 'qc-6', 'qc-old']) {
      const types = board.of(id).map((e) => e.type);
      expect(types).toEqual(['run.accepted', 'run.queued', 'run.completed']);
      expect(f.mesh.invocations.filter((i) => i.run_id === id)).toEqual([]);
    }
    expect(f.mesh.invocations.filter((i) => i.run_id === 'qc-3')).toHaveLength(1);
  }, 120_000);
});

describe('cancel of a queued run under deploy/nats/nats.conf', () => {
  it('the ops user cancels a waiting run with agentmesh runs cancel; the planner ends it within its grants', async () => {
    const { client, planner, as, dispose } = await startDeployFleet(
      'tenants:\n  acme: { max_concurrent_runs: 1, max_queued_runs: 10 }\n',
    );
    const prefix = { prefix: 'agentmesh' };
    try {
      const run = (id: string, delayMs: number) =>
        submitRun(
          client,
          { id, task: 'auth', identity: { tenant: 'acme' }, script: [{ text: 'ok', delay_ms: delayMs }] },
          prefix,
        );
      await run('auth-hold', 60_000);
      await run('auth-queued', 0);
      await waitForRunEvent(client, 'auth-hold', (e) => e.type === 'run.started', {
        ...prefix,
        timeoutMs: TIMEOUT_MS,
      });
      await waitForRunEvent(client, 'auth-queued', (e) => e.type === 'run.queued', {
        ...prefix,
        timeoutMs: TIMEOUT_MS,
      });
      const queued = () => statusQueued(runAgentmesh(['status', '--json'], { env: as('ops') }), 'acme');
      await until('auth-queued in the queued count', async () => (await queued()) === 1);
      const cancel = await runAgentmesh(['runs', 'cancel', 'auth-queued', '--reason', 'ops'], {
        env: as('ops'),
      });
      expect(cancel.stderr).toBe('');
      expect(cancel.stdout).toContain('run auth-queued was waiting in the queue of tenant acme: cancelled');
      // the planner deleted its message within its grants: the count dropped while auth-hold still runs
      expect(await queued()).toBe(0);
      expect(await waitForRunEnd(client, 'auth-queued', { ...prefix, timeoutMs: TIMEOUT_MS })).toMatchObject({
        type: 'run.completed',
        status: 'cancelled',
      });
      await run('auth-after', 0);
      await waitForRunEvent(client, 'auth-after', (e) => e.type === 'run.queued', {
        ...prefix,
        timeoutMs: TIMEOUT_MS,
      });
      const stop = await runAgentmesh(['runs', 'cancel', 'auth-hold'], { env: as('ops') });
      expect(stop.stdout).toContain('cancel sent to run auth-hold');
      expect(await waitForRunEnd(client, 'auth-hold', { ...prefix, timeoutMs: TIMEOUT_MS })).toMatchObject({
        status: 'cancelled',
      });
      // auth-after started once auth-hold ended (auth-queued's message was gone, nothing to drop before it)
      expect(await waitForRunEnd(client, 'auth-after', { ...prefix, timeoutMs: TIMEOUT_MS })).toMatchObject({
        status: 'done',
      });
      const events = await readRunEvents(client, 'auth-queued', prefix);
      expect(events.map((e) => e.type)).toEqual(['run.accepted', 'run.queued', 'run.completed']);
      expect(planner.logs()).not.toMatch(/permission|violation/i);
    } finally {
      await dispose();
    }
  }, 120_000);
});
