/**
 * Issue 35, a rolling restart under load on a real nats-server: a fleet of 3 planner processes, 2 worker processes
 * and a catalog holds 60 runs in flight, 15 of them waiting on approval. The planners are restarted one at a time
 * (SIGTERM, then a new one; again with kill -9) while `agentmesh runs approve` / `deny` processes decide the 15
 * approvals. Every run ends exactly once with its own answer, approved calls run once, denied ones never, no
 * non-idempotent tool call runs twice (the workers' `ledger.append` writes a line per execution), no decision is lost.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { NatsBus, subjects, type RunEvent, type Subscription } from '@agentmesh/protocol';
import { ApprovalStore, openApprovals, readRunEvents, submitRun } from '@agentmesh/planner';
import { dropPrefix, uniquePrefix } from './fixtures/llm/nats.js';
import { cleanEnv, runAgentmesh, startActor, type ActorProcess } from './helpers/cli.js';
import { ledgerExecutions, startDurableWorker } from './helpers/nats-cluster.js';
import { EventBoard } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
const RUNS = 60;
const APPROVALS = 15;
/** Tool turns of a run that needs no approval, each a model turn of TURN_MS then one `ledger.append`. */
const TURNS = 6;
const TURN_MS = 1_500;

type Approval = Extract<RunEvent, { type: 'approval.requested' }>;
const isFinal = (e: RunEvent) => e.type === 'run.completed' || e.type === 'run.failed';
const runId = (i: number) => `roll-${i}`;
const approves = (i: number) => i % 3 !== 2;

/** Runs 0..14 ask to append once (approval needed); the others append TURNS times, a turn every TURN_MS. */
function request(i: number) {
  const ledger = (call: string) => ({
    id: call,
    name: 'ledger.append',
    arguments: { entry: `${i}-${call}` },
  });
  if (i < APPROVALS)
    return {
      id: runId(i),
      task: `append once after a decision (${i})`,
      tools: ['ledger'],
      tool_search: 'off' as const,
      approvals: { require: ['ledger.append'] },
      script: [{ tool_calls: [ledger('a')] }, { text: `decided ${i}` }],
      limits: { timeout_ms: 300_000 },
    };
  const turns = Array.from({ length: TURNS }, (_, t) => ({
    delay_ms: TURN_MS,
    tool_calls: [ledger(`c${t}`)],
  }));
  return {
    id: runId(i),
    task: `append ${TURNS} times (${i})`,
    tools: ['ledger'],
    tool_search: 'off' as const,
    script: [...turns, { text: `done ${i}` }],
    limits: { timeout_ms: 300_000 },
  };
}

interface Fleet {
  prefix: string;
  client: NatsBus;
  board: EventBoard;
  ledger: string;
  planners: ActorProcess[];
  startPlanner(): Promise<ActorProcess>;
  stop(): Promise<void>;
}

let current: Fleet | undefined;
afterEach(async () => {
  await current?.stop();
  current = undefined;
});

async function startFleet(): Promise<Fleet> {
  const prefix = uniquePrefix('roll');
  const dir = mkdtempSync(join(tmpdir(), 'agentmesh-roll-'));
  const ledger = join(dir, 'ledger.txt');
  writeFileSync(ledger, '');
  const env = cleanEnv({ AGENTMESH_REDELIVER_MS: '1000' });
  const client = await NatsBus.connect(natsUrl);
  const board = new EventBoard();
  const sub: Subscription = client.subscribe(subjects(prefix).allRunEvents, (msg) => {
    board.add(JSON.parse(new TextDecoder().decode(msg.data)) as RunEvent);
  });
  const actors: ActorProcess[] = [];
  const workers: ChildProcess[] = [];
  const base = ['--nats', natsUrl, '--prefix', prefix];
  const startPlanner = async () => {
    const planner = await startActor(['planner', ...base, '--drain-timeout', '20s'], env);
    actors.push(planner);
    return planner;
  };
  const fleet: Fleet = {
    prefix,
    client,
    board,
    ledger,
    planners: [],
    startPlanner,
    async stop() {
      sub.unsubscribe();
      for (const a of actors) await a.stop('SIGKILL').catch(() => undefined);
      for (const w of workers) w.kill('SIGKILL');
      await dropPrefix(client, prefix).catch(() => undefined);
      await client.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  current = fleet;
  actors.push(await startActor(['catalog', ...base], env));
  const workerEnv = { ...env, NATS_URL: natsUrl, AGENTMESH_PREFIX: prefix, DURABLE_LEDGER: ledger };
  const started = await Promise.all([
    startDurableWorker(workerEnv),
    startDurableWorker(workerEnv),
    ...[0, 1, 2].map(() => startPlanner()),
  ]);
  workers.push(...(started.slice(0, 2) as ChildProcess[]));
  fleet.planners.push(...(started.slice(2) as ActorProcess[]));
  return fleet;
}

/** Submits the 60 runs; resolves with the 15 approval requests once every run has started. */
async function loadFleet(fleet: Fleet): Promise<Approval[]> {
  const { client, prefix, board } = fleet;
  await Promise.all(Array.from({ length: RUNS }, (_, i) => submitRun(client, request(i), { prefix })));
  await board.until(
    'all 60 runs in flight',
    () =>
      Array.from({ length: RUNS }, (_, i) => board.of(runId(i)).length > 0).every(Boolean) ? true : undefined,
    { timeoutMs: 60_000 },
  );
  return Promise.all(
    Array.from({ length: APPROVALS }, (_, i) =>
      board.until(
        `the approval request of ${runId(i)}`,
        () => board.of(runId(i)).find((e): e is Approval => e.type === 'approval.requested'),
        { timeoutMs: 60_000 },
      ),
    ),
  );
}

/** `agentmesh runs approve|deny` for approval i, as an operator would type it. */
function decide(fleet: Fleet, approval: Approval, i: number) {
  const verb = approves(i) ? 'approve' : 'deny';
  return runAgentmesh(
    [
      'runs',
      verb,
      approval.run_id,
      approval.approval_id,
      '--by',
      `op-${i}`,
      '--nats',
      natsUrl,
      '--prefix',
      fleet.prefix,
    ],
    { env: cleanEnv(), timeoutMs: 60_000 },
  );
}

/** Restarts the planners one at a time with `signal`, deciding a third of the approvals during each restart. */
async function rollingRestart(fleet: Fleet, approvals: Approval[], signal: NodeJS.Signals) {
  const decisions: ReturnType<typeof decide>[] = [];
  const exits: (number | null)[] = [];
  const per = Math.ceil(APPROVALS / fleet.planners.length);
  for (const [step, old] of [...fleet.planners].entries()) {
    const exited = old.stop(signal);
    for (let i = step * per; i < Math.min(APPROVALS, (step + 1) * per); i++)
      decisions.push(decide(fleet, approvals[i]!, i));
    const code = await exited;
    exits.push(code);
    if (signal === 'SIGTERM' && code !== 0)
      console.log(`planner ${step} exited ${code}:\n${old.logs().slice(-3000)}`);
    fleet.planners[step] = await fleet.startPlanner();
  }
  return { exits, results: await Promise.all(decisions) };
}

/** The stored events of every run, once all 60 have ended. */
async function settle(fleet: Fleet): Promise<RunEvent[][]> {
  const { board, client, prefix } = fleet;
  await board.until(
    'every run to end',
    () =>
      Array.from({ length: RUNS }, (_, i) => board.of(runId(i)).some(isFinal)).every(Boolean)
        ? true
        : undefined,
    { timeoutMs: 120_000 },
  );
  return Promise.all(Array.from({ length: RUNS }, (_, i) => readRunEvents(client, runId(i), { prefix })));
}

/** Every run ended once with its answer, each call ran as decided and at most once, each decision recorded. */
async function expectExactlyOnce(fleet: Fleet, approvals: Approval[], stored: RunEvent[][]) {
  const executions = ledgerExecutions(fleet.ledger);
  expect([...executions].filter(([, n]) => n > 1)).toEqual([]);
  for (const [i, events] of stored.entries()) {
    const id = runId(i);
    expect(
      events.map((e) => e.seq),
      id,
    ).toEqual(events.map((_, k) => k + 1));
    expect(events.filter(isFinal), id).toHaveLength(1);
    const liveFinals = new Set(
      fleet.board
        .of(id)
        .filter(isFinal)
        .map((e) => e.seq),
    );
    expect(liveFinals.size, id).toBe(1);
    const final = events.find(isFinal);
    if (i >= APPROVALS) {
      expect(final, id).toMatchObject({ type: 'run.completed', status: 'done', text: `done ${i}` });
      for (let t = 0; t < TURNS; t++) expect(executions.get(`${id} c${t}`), `${id} c${t}`).toBe(1);
      continue;
    }
    expect(final, id).toMatchObject({ type: 'run.completed', status: 'done', text: `decided ${i}` });
    const decided = events.filter((e) => e.type === 'approval.decided');
    expect(decided, id).toHaveLength(1);
    expect(decided[0], id).toMatchObject({ decision: approves(i) ? 'approve' : 'deny', by: `op-${i}` });
    expect(executions.get(`${id} a`), `${id} a`).toBe(approves(i) ? 1 : undefined);
    const outcome = events.find(
      (e) => (e.type === 'tool.completed' || e.type === 'tool.failed') && e.call_id === 'a',
    );
    if (approves(i)) expect(outcome, id).toMatchObject({ type: 'tool.completed', is_error: false });
    else expect(outcome, id).toMatchObject({ type: 'tool.failed', error: { code: 'approval_denied' } });
  }
  const store = new ApprovalStore(await openApprovals(fleet.client, fleet.prefix));
  for (const [i, approval] of approvals.entries())
    expect(await store.get(approval.run_id, approval.approval_id)).toMatchObject({
      state: approves(i) ? 'approved' : 'denied',
      by: `op-${i}`,
    });
}

describe('a rolling restart of the planners under load', () => {
  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    it(`${signal}: 60 runs in flight and 15 decided meanwhile each end once, no effect twice`, async () => {
      const started = Date.now();
      const fleet = await startFleet();
      const approvals = await loadFleet(fleet);
      const { exits, results } = await rollingRestart(fleet, approvals, signal);
      for (const r of results) expect(r.code, r.stderr).toBe(0);
      if (signal === 'SIGTERM') expect(exits).toEqual([0, 0, 0]);
      const stored = await settle(fleet);
      await expectExactlyOnce(fleet, approvals, stored);
      const resumed = stored.filter((events) =>
        events.some((e) => e.type === 'run.started' && e.resumed === true),
      );
      expect(resumed.length).toBeGreaterThan(0);
      console.log(`${signal}: ${resumed.length} of ${RUNS} runs moved planners; ${Date.now() - started} ms`);
    }, 240_000);
  }
});
