/**
 * Issue 35, retry-safe control requests on a real nats-server: a decision sent to the planner that dies at that
 * moment is sent again by `agentmesh runs approve` and lands once; a repeat of a request id is answered
 * `duplicate: true`; a different decision stays `already_decided` and names the decision recorded and its decider.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  isAgentMeshError,
  runControlSubjects,
  type NatsBus,
  type RunEvent,
  type Subscription,
} from '@agentmesh/protocol';
import {
  ApprovalStore,
  openApprovals,
  readRunEvents,
  sendApprovalDecision,
  sendRunControl,
  submitRun,
} from '@agentmesh/planner';
import type { FakeMesh } from './fixtures/llm/mesh.js';
import { startNatsFleet, type NatsFleet } from './helpers/fleet.js';
import { cleanEnv, runAgentmesh, startActor, type ActorProcess } from './helpers/cli.js';
import { until, waitForRunEnd, waitForRunEvent } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
let fleet: NatsFleet;
let prefix: string;
let client: NatsBus;
let mesh: FakeMesh;
const actors: ActorProcess[] = [];

const cli = (args: string[]) =>
  runAgentmesh(['runs', ...args, '--nats', natsUrl, '--prefix', prefix], { env: cleanEnv() });
const calcCalls = (runId: string) =>
  mesh.invocations.filter((i) => i.run_id === runId && i.tool === 'math.calc').length;
const requested = (runId: string) =>
  waitForRunEvent(
    client,
    runId,
    (e): e is Extract<RunEvent, { type: 'approval.requested' }> => e.type === 'approval.requested',
    { prefix, what: `approval.requested of ${runId}` },
  );

function submit(runId: string, lastTurnMs = 0) {
  return submitRun(
    client,
    {
      id: runId,
      task: 'compute with approval',
      tool_search: 'off',
      approvals: { require: ['math.calc'] },
      script: [
        { tool_calls: [{ name: 'math.calc', arguments: { lhs: 6, rhs: 7, op: 'mul' } }] },
        { text: 'done', delay_ms: lastTurnMs },
      ],
    },
    { prefix },
  );
}

async function plannerProcess(): Promise<ActorProcess> {
  const actor = await startActor(
    ['planner', '--nats', natsUrl, '--prefix', prefix],
    cleanEnv({ AGENTMESH_REDELIVER_MS: '1000' }),
  );
  actors.push(actor);
  return actor;
}

/** Counts the decision requests published on `runs.*.approve` (every attempt, whoever gets it). */
function watchAttempts(): { seen: () => number; stop: () => void } {
  let seen = 0;
  const sub: Subscription = client.subscribe(runControlSubjects(prefix).allApprovals, () => void seen++);
  return { seen: () => seen, stop: () => sub.unsubscribe() };
}

beforeAll(async () => {
  fleet = await startNatsFleet(natsUrl, { prefixTag: 'apr' });
  ({ prefix, client, mesh } = fleet);
  fleet.onStop(async () => {
    for (const a of actors) await a.stop('SIGKILL').catch(() => undefined);
  });
});

afterAll(() => fleet.stop());

describe('retry-safe approvals over NATS', () => {
  it('the planner that gets the decision dies at that moment: runs approve sends it again, it lands once', async () => {
    const doomed = await plannerProcess();
    const runIds = ['apr-kill-1', 'apr-kill-2', 'apr-kill-3'];
    for (const id of runIds) await submit(id);
    const approvals = await Promise.all(runIds.map((id) => requested(id)));
    // the doomed planner is the only one in the queue group: every first attempt goes to it, and it dies holding
    // them (frozen, then killed -9), as a planner killed at the moment of the request does
    const attempts = watchAttempts();
    doomed.child.kill('SIGSTOP');
    const commands = runIds.map((id, i) => cli(['approve', id, approvals[i]!.approval_id, '--by', 'ops']));
    await until('every first attempt sent', () => (attempts.seen() >= runIds.length ? true : undefined));
    doomed.child.kill('SIGKILL');
    await fleet.planner('apr-survivor');
    const results = await Promise.all(commands);
    attempts.stop();
    for (const [i, result] of results.entries()) {
      expect(result.stderr).not.toContain('agentmesh runs approve:');
      expect(result.stderr).toContain('no answer: sending again');
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(
        new RegExp(`approved ${approvals[i]!.approval_id} of run ${runIds[i]} \\(after [2-9] attempts`),
      );
    }
    const store = new ApprovalStore(await openApprovals(client, prefix));
    for (const [i, id] of runIds.entries()) {
      const final = await waitForRunEnd(client, id, { prefix });
      expect(final).toMatchObject({ type: 'run.completed', status: 'done' });
      expect(calcCalls(id)).toBe(1);
      const record = await store.get(id, approvals[i]!.approval_id);
      expect(record).toMatchObject({ state: 'approved', by: 'ops' });
      const decided = (await readRunEvents(client, id, { prefix })).filter(
        (e) => e.type === 'approval.decided',
      );
      expect(decided).toHaveLength(1);
    }
  }, 90_000);

  it('the same request id twice: the second is duplicate with the same outcome; another decision is already_decided', async () => {
    await fleet.planner('apr-dup');
    const runId = 'apr-dup';
    await submit(runId, 8_000); // the run goes on while the decisions below are sent
    const { approval_id } = await requested(runId);
    const first = await cli(['approve', runId, approval_id, '--by', 'ann', '--request-id', 'rq-1', '--json']);
    const second = await cli([
      'approve',
      runId,
      approval_id,
      '--by',
      'ann',
      '--request-id',
      'rq-1',
      '--json',
    ]);
    expect(first.code).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ ok: true, request_id: 'rq-1', duplicate: false });
    expect(second.code).toBe(0);
    expect(JSON.parse(second.stdout)).toMatchObject({ ok: true, decision: 'approve', duplicate: true });
    const denied = await cli(['deny', runId, approval_id, '--by', 'bob', '--json']);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/already_decided: .*already decided: approve by ann/);
    expect(JSON.parse(denied.stdout)).toMatchObject({
      ok: false,
      error: { code: 'already_decided', details: { decision: 'approve', by: 'ann' } },
    });
    const human = await cli(['approve', runId, approval_id, '--by', 'ann', '--request-id', 'rq-1']);
    expect(human.stdout).toContain('an earlier one had landed');
    // the same request id with another decision is not a repeat of it
    const reused = await sendApprovalDecision(
      client,
      runId,
      { approval_id, decision: 'deny', by: 'ann', request_id: 'rq-1' },
      { prefix },
    ).catch((e: unknown) => e);
    expect(isAgentMeshError(reused, 'already_decided')).toBe(true);

    expect(await waitForRunEnd(client, runId, { prefix })).toMatchObject({ status: 'done' });
    expect(calcCalls(runId)).toBe(1);
  }, 60_000);

  it('input and pause with the same request id twice are recorded once', async () => {
    const runId = 'apr-ctl';
    await sendRunControl(client, runId, { kind: 'pause' }, { prefix, requestId: 'rq-p' });
    expect(
      await sendRunControl(client, runId, { kind: 'pause' }, { prefix, requestId: 'rq-p' }),
    ).toMatchObject({
      duplicate: true,
    });
    const input = { kind: 'input', text: 'say it once' } as const;
    expect(await sendRunControl(client, runId, input, { prefix, requestId: 'rq-i' })).not.toHaveProperty(
      'duplicate',
    );
    expect(await sendRunControl(client, runId, input, { prefix, requestId: 'rq-i' })).toMatchObject({
      ok: true,
      duplicate: true,
    });
    await submitRun(
      client,
      { id: runId, task: 'wait', tool_search: 'off', script: [{ text: 'ok' }] },
      { prefix },
    );
    await waitForRunEvent(client, runId, (e) => e.type === 'run.paused', { prefix });
    const resumed = await cli(['resume', runId, '--request-id', 'rq-r']);
    expect(resumed.code).toBe(0);
    expect(await waitForRunEnd(client, runId, { prefix })).toMatchObject({ status: 'done' });
    const inputs = (await readRunEvents(client, runId, { prefix })).filter((e) => e.type === 'run.input');
    expect(inputs).toHaveLength(1);
  }, 60_000);
});
