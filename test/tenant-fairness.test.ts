/**
 * Issue 33, fair and bounded intake on a real nats-server with 2 planners: a tenant's concurrency cap holds across
 * the fleet, its backlog waits as `run.queued` without blocking another tenant, free slots go by weight, priority
 * orders a tenant's waiting runs, `max_queued_runs` refuses with `queue_full`, and a planner killed -9 while runs
 * wait loses none and starts none twice.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  NOOP_METRICS,
  RunEventSchema,
  createActorMetrics,
  setProcessMetrics,
  subjects,
  type RunEvent,
  type Subscription,
  type TenantsConfig,
} from '@agentmesh/protocol';
import { readRunEvents, sendApprovalDecision, submitRun } from '@agentmesh/planner';
import { cleanEnv, runAgentmesh, startActor, type ActorProcess } from './helpers/cli.js';
import { startNatsFleet, type NatsFleet } from './helpers/fleet.js';
import { EventBoard, waitForRunEnd } from './helpers/wait.js';
import { startDeployFleet } from './helpers/deploy-nats.js';

const natsUrl = inject('natsUrl');
const TIMEOUT_MS = 60_000;

interface Fleet {
  fleet: NatsFleet;
  board: EventBoard;
  /** Run ids in the order their (first, not resumed) run.started arrived. */
  starts: string[];
  /** Every event, in arrival order. */
  all: RunEvent[];
  sub: Subscription;
}

const fleets: Fleet[] = [];
const metrics = createActorMetrics('planner');
const actors: ActorProcess[] = [];

async function tenantFleet(tag: string): Promise<Fleet> {
  const fleet = await startNatsFleet(natsUrl, { prefixTag: tag });
  const board = new EventBoard();
  const starts: string[] = [];
  const all: RunEvent[] = [];
  const sub = fleet.client.subscribe(subjects(fleet.prefix).allRunEvents, (msg) => {
    const event = RunEventSchema.parse(JSON.parse(msg.text())) as RunEvent;
    if (event.type === 'run.started' && event.resumed !== true) starts.push(event.run_id);
    all.push(event);
    board.add(event);
  });
  const made = { fleet, board, starts, all, sub };
  fleets.push(made);
  return made;
}

/** Two planners with `tenants`, started one after the other (two opening the same buckets at once can race). */
async function planners(
  f: Fleet,
  tenants: TenantsConfig,
  extra: Partial<Parameters<NatsFleet['planner']>[1]> = {},
) {
  for (const n of ['a', 'b']) await f.fleet.planner(`${f.fleet.prefix}-${n}`, { tenants, ...extra });
}

function submit(f: Fleet, id: string, tenant: string, extra: Record<string, unknown> = {}) {
  return submitRun(
    f.fleet.client,
    {
      id,
      task: 'fair intake',
      tool_search: 'off',
      identity: { tenant },
      script: [{ text: 'ok', delay_ms: 50 }],
      ...extra,
    },
    { prefix: f.fleet.prefix },
  );
}

const ended = (f: Fleet, id: string) =>
  f.board.of(id).find((e) => e.type === 'run.completed' || e.type === 'run.failed');

function allEnded(f: Fleet, ids: string[]) {
  return f.board.until(
    `the end of ${ids.length} runs`,
    () => (ids.every((id) => ended(f, id) !== undefined) ? true : undefined),
    { timeoutMs: TIMEOUT_MS, pollMs: 200 },
  );
}

function eventOf(f: Fleet, id: string, type: RunEvent['type']) {
  return f.board.until(`${type} of ${id}`, () => f.board.of(id).find((e) => e.type === type), {
    timeoutMs: TIMEOUT_MS,
  });
}

/** A run that waits for approval (it counts as started) until the test approves it. */
function heldRun(f: Fleet, id: string, tenant: string) {
  return submit(f, id, tenant, {
    approvals: { require: ['math.calc'] },
    script: [
      { tool_calls: [{ name: 'math.calc', arguments: { lhs: 1, rhs: 2, op: 'add' } }] },
      { text: 'done' },
    ],
  });
}

async function release(f: Fleet, id: string) {
  const requested = await eventOf(f, id, 'approval.requested');
  if (requested.type !== 'approval.requested') throw new Error('not an approval');
  await sendApprovalDecision(
    f.fleet.client,
    id,
    { approval_id: requested.approval_id, decision: 'approve', by: 'test' },
    { prefix: f.fleet.prefix },
  );
}

beforeAll(() => {
  setProcessMetrics(metrics);
});

afterAll(async () => {
  setProcessMetrics(NOOP_METRICS);
  for (const a of actors) await a.stop('SIGKILL').catch(() => undefined);
  for (const f of fleets) {
    f.sub.unsubscribe();
    await f.fleet.stop();
  }
});

describe('fair intake across 2 planners', () => {
  it('never runs more of a tenant than max_concurrent_runs; the rest wait as run.queued', async () => {
    const f = await tenantFleet('tf-cap');
    await planners(f, { crowd: { max_concurrent_runs: 2 } });
    const ids = Array.from({ length: 10 }, (_, i) => `cap-${i}`);
    for (const id of ids) await submit(f, id, 'crowd', { script: [{ text: 'ok', delay_ms: 300 }] });
    await allEnded(f, ids);
    let running = 0;
    let peak = 0;
    for (const e of f.all) {
      if (e.type === 'run.started' && e.resumed !== true) running++;
      if (e.type === 'run.completed' || e.type === 'run.failed') running--;
      peak = Math.max(peak, running);
    }
    expect(f.starts).toHaveLength(10);
    expect(peak).toBe(2);
    for (const id of ids) expect(ended(f, id)).toMatchObject({ type: 'run.completed', status: 'done' });
    const queued = ids.filter((id) => f.board.of(id).some((e) => e.type === 'run.queued'));
    expect(queued.length).toBeGreaterThanOrEqual(6);
    for (const id of queued) {
      const types = f.board.of(id).map((e) => e.type);
      expect(types.slice(0, 3)).toEqual(['run.accepted', 'run.queued', 'run.started']);
    }
  }, 90_000);

  it("another tenant's run starts while the first tenant's backlog waits", async () => {
    const f = await tenantFleet('tf-other');
    await planners(f, { crowd: { max_concurrent_runs: 1 } });
    const crowd = Array.from({ length: 5 }, (_, i) => `crowd-${i}`);
    for (const id of crowd) await submit(f, id, 'crowd', { script: [{ text: 'ok', delay_ms: 1_000 }] });
    await eventOf(f, crowd[0]!, 'run.started');
    await submit(f, 'solo', 'solo');
    await eventOf(f, 'solo', 'run.completed');
    const crowdStarted = crowd.filter((id) => f.starts.includes(id)).length;
    expect(crowdStarted).toBeLessThanOrEqual(2);
    await allEnded(f, crowd);
  }, 90_000);

  it('gives free slots to waiting tenants in proportion to weight', async () => {
    const f = await tenantFleet('tf-weight');
    // the heavier tenant sorts last, so the scheduler's tie-break never favours it
    await planners(f, { wide: { weight: 2 }, narrow: { weight: 1 } }, { maxConcurrentRuns: 1 });
    await heldRun(f, 'hold-a', 'other');
    await heldRun(f, 'hold-b', 'other');
    await eventOf(f, 'hold-a', 'approval.requested');
    await eventOf(f, 'hold-b', 'approval.requested');
    const wide = Array.from({ length: 16 }, (_, i) => `wide-${i}`);
    const narrow = Array.from({ length: 16 }, (_, i) => `narrow-${i}`);
    for (let i = 0; i < 16; i++) {
      await submit(f, narrow[i]!, 'narrow');
      await submit(f, wide[i]!, 'wide');
    }
    for (const id of [...wide, ...narrow]) await eventOf(f, id, 'run.queued');
    await release(f, 'hold-a');
    await release(f, 'hold-b');
    await allEnded(f, [...wide, ...narrow]);
    const first = f.starts.filter((id) => id.startsWith('wide') || id.startsWith('narrow')).slice(0, 18);
    const wideFirst = first.filter((id) => id.startsWith('wide')).length;
    // 2:1 gives 12 of 18; equal weights would give at most 9
    expect(wideFirst).toBeGreaterThanOrEqual(11);
    expect(wideFirst).toBeLessThanOrEqual(14);
  }, 90_000);

  it("starts a tenant's waiting runs by priority", async () => {
    const f = await tenantFleet('tf-prio');
    await planners(f, { prio: { max_concurrent_runs: 1 } });
    await heldRun(f, 'prio-hold', 'prio');
    await eventOf(f, 'prio-hold', 'approval.requested');
    const ids = [5, 4, 3, 2, 1].map((p) => `prio-${p}`);
    for (const [i, id] of ids.entries()) await submit(f, id, 'prio', { priority: 5 - i });
    for (const id of ids) await eventOf(f, id, 'run.queued');
    await release(f, 'prio-hold');
    await allEnded(f, ids);
    expect(f.starts.filter((id) => ids.includes(id))).toEqual([
      'prio-1',
      'prio-2',
      'prio-3',
      'prio-4',
      'prio-5',
    ]);
    const scraped = await metrics.scrape();
    const waits = /^agentmesh_tenant_queue_wait_seconds_count\{[^}]*tenant="prio"[^}]*\} (\d+)$/m.exec(
      scraped,
    );
    expect(Number(waits?.[1])).toBeGreaterThanOrEqual(5);
    expect(scraped).toMatch(/^agentmesh_tenant_queued_runs\{[^}]*tenant="prio"[^}]*\} \d+$/m);
  }, 90_000);

  it('counts a submission that waits against runs_per_minute when it is submitted, not when it starts', async () => {
    const f = await tenantFleet('tf-rate');
    await planners(f, { rated: { max_concurrent_runs: 1, runs_per_minute: 3 } });
    // the four submissions must fall in one minute window (windows follow the clock's minutes)
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 45_000) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 50));
    await heldRun(f, 'rate-hold', 'rated');
    await eventOf(f, 'rate-hold', 'approval.requested');
    // two planners dispatch submissions concurrently: rate-3 goes in only once the other two took their slots
    for (const id of ['rate-1', 'rate-2']) await submit(f, id, 'rated');
    await eventOf(f, 'rate-1', 'run.queued');
    await eventOf(f, 'rate-2', 'run.queued');
    await submit(f, 'rate-3', 'rated');
    const refused = await eventOf(f, 'rate-3', 'run.failed');
    expect(refused).toMatchObject({ error: { code: 'rate_limited', details: { runs_per_minute: 3 } } });
    expect(f.board.of('rate-3').some((e) => e.type === 'run.queued')).toBe(false);
    expect(f.board.of('rate-hold').some((e) => e.type === 'run.completed')).toBe(false);
    await release(f, 'rate-hold');
    await allEnded(f, ['rate-hold', 'rate-1', 'rate-2']);
    for (const id of ['rate-hold', 'rate-1', 'rate-2'])
      expect(ended(f, id)).toMatchObject({ type: 'run.completed', status: 'done' });
  }, 90_000);

  it('refuses a submission beyond max_queued_runs with queue_full, as run.failed on its events', async () => {
    const f = await tenantFleet('tf-full');
    await planners(f, { full: { max_concurrent_runs: 1, max_queued_runs: 2 } });
    await heldRun(f, 'full-hold', 'full');
    await eventOf(f, 'full-hold', 'approval.requested');
    await submit(f, 'full-1', 'full');
    await submit(f, 'full-2', 'full');
    await eventOf(f, 'full-1', 'run.queued');
    await eventOf(f, 'full-2', 'run.queued');
    await submit(f, 'full-3', 'full');
    const refused = await eventOf(f, 'full-3', 'run.failed');
    expect(refused).toMatchObject({ error: { code: 'queue_full' } });
    expect(f.board.of('full-3').some((e) => e.type === 'run.started')).toBe(false);
    const args = ['status', '--nats', natsUrl, '--prefix', f.fleet.prefix];
    const json = await runAgentmesh([...args, '--json'], { env: cleanEnv() });
    expect(json.code).toBe(0);
    const status = JSON.parse(json.stdout) as {
      tenants: { tenant: string; queued: number; running: number }[];
    };
    expect(status.tenants).toContainEqual({ tenant: 'full', queued: 2, running: 1 });
    const human = await runAgentmesh(args, { env: cleanEnv() });
    expect(human.stdout).toMatch(/TENANT\s+QUEUED\s+RUNNING\n\s*full\s+2\s+1/);
    await release(f, 'full-hold');
    await allEnded(f, ['full-1', 'full-2']);
    expect(ended(f, 'full-1')).toMatchObject({ type: 'run.completed' });
    expect(ended(f, 'full-2')).toMatchObject({ type: 'run.completed' });
  }, 90_000);

  it("a child run does not wait behind its own tenant's cap (its parent holds the only slot)", async () => {
    const f = await tenantFleet('tf-child');
    await planners(f, { family: { max_concurrent_runs: 1 } });
    await submit(f, 'parent', 'family', {
      tools: ['agent'],
      script: [
        {
          tool_calls: [
            { id: 'c1', name: 'agent__run', arguments: { task: 'child', script: [{ text: 'child done' }] } },
          ],
        },
        { text: 'parent done' },
      ],
    });
    expect(await eventOf(f, 'parent', 'run.completed')).toMatchObject({
      status: 'done',
      text: 'parent done',
    });
    expect(await eventOf(f, 'parent', 'agent.completed')).toMatchObject({ status: 'done' });
  }, 90_000);

  it('a planner killed -9 while runs wait: every run still starts exactly once', async () => {
    const f = await tenantFleet('tf-kill');
    const dir = mkdtempSync(join(tmpdir(), 'tf-kill-'));
    const config = join(dir, 'agentmesh.yaml');
    writeFileSync(config, 'tenants:\n  crowd: { max_concurrent_runs: 2 }\n');
    const start = async () => {
      const actor = await startActor(
        ['planner', '--nats', natsUrl, '--prefix', f.fleet.prefix, '--config', config],
        cleanEnv({ AGENTMESH_REDELIVER_MS: '1000' }),
      );
      actors.push(actor);
      return actor;
    };
    const doomed = await start();
    await start();
    const ids = Array.from({ length: 12 }, (_, i) => `kill-${i}`);
    for (const id of ids) await submit(f, id, 'crowd', { script: [{ text: 'ok', delay_ms: 400 }] });
    await f.board.until('3 runs to start', () => (f.starts.length >= 3 ? true : undefined), {
      timeoutMs: TIMEOUT_MS,
    });
    await doomed.stop('SIGKILL');
    await allEnded(f, ids);
    for (const id of ids) {
      expect(ended(f, id)).toMatchObject({ type: 'run.completed', status: 'done' });
      expect(f.starts.filter((s) => s === id)).toHaveLength(1);
    }
  }, 120_000);
});

describe('fair intake under deploy/nats/nats.conf', () => {
  it('the planner user may run the fair intake: a capped tenant queues and every run completes', async () => {
    const { client, planner, dispose } = await startDeployFleet(
      'tenants:\n  acme: { max_concurrent_runs: 1, max_queued_runs: 10 }\n',
    );
    try {
      const ids = ['auth-0', 'auth-1', 'auth-2'];
      for (const id of ids)
        await submitRun(
          client,
          { id, task: 'auth', identity: { tenant: 'acme' }, script: [{ text: 'ok', delay_ms: 300 }] },
          { prefix: 'agentmesh' },
        );
      for (const id of ids)
        expect(await waitForRunEnd(client, id, { prefix: 'agentmesh', timeoutMs: TIMEOUT_MS })).toMatchObject(
          {
            type: 'run.completed',
            status: 'done',
          },
        );
      const queued = await Promise.all(
        ids.map(async (id) =>
          (await readRunEvents(client, id, { prefix: 'agentmesh' })).some((e) => e.type === 'run.queued'),
        ),
      );
      expect(queued.filter(Boolean).length).toBeGreaterThanOrEqual(1);
      expect(planner.logs()).not.toMatch(/permission|violation/i);
    } finally {
      await dispose();
    }
  }, 120_000);
});
