/**
 * Issue 15, approvals on a real nats-server: a call needing approval waits (status awaiting_approval in the run
 * record) while the other calls of its turn run; any planner answers `runs.<id>.approve`; a decision made while the
 * planner holding the run is dead is applied by the planner that resumes it; racing decisions; timeout; bad input.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { encodeJson, runControlSubjects, type NatsBus, type RunEvent } from '@agentmesh/protocol';
import {
  readRunEvents,
  readRunRecord,
  sendApprovalDecision,
  sendRunControl,
  submitRun,
} from '@agentmesh/planner';
import type { FakeMesh } from './fixtures/llm/mesh.js';
import { startNatsFleet, type NatsFleet } from './helpers/fleet.js';
import { cleanEnv, runAgentmesh } from './helpers/cli.js';
import { until, waitForRunEnd, waitForRunEvent } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
const LEASE_MS = 2_000;
let fleet: NatsFleet;
let prefix: string;
let client: NatsBus;
let mesh: FakeMesh;

const startPlanner = (id: string) => fleet.planner(id, { durability: { leaseMs: LEASE_MS } });

const events = (runId: string) => readRunEvents(client, runId, { prefix });
const requested = (runId: string) =>
  waitForRunEvent(
    client,
    runId,
    (e): e is Extract<RunEvent, { type: 'approval.requested' }> => e.type === 'approval.requested',
    { prefix, what: `approval.requested of ${runId}` },
  );
const finalOf = (runId: string) => waitForRunEnd(client, runId, { prefix });
const calcCalls = (runId: string) =>
  mesh.invocations.filter((i) => i.run_id === runId && i.tool === 'math.calc').length;

function submit(runId: string, extra: Record<string, unknown> = {}) {
  return submitRun(
    client,
    {
      id: runId,
      task: 'compute with approval',
      approvals: { require: ['math.calc'] },
      script: [
        { tool_calls: [{ name: 'math.calc', arguments: { lhs: 6, rhs: 7, op: 'mul' } }] },
        { text: 'done' },
      ],
      ...extra,
    },
    { prefix },
  );
}

beforeAll(async () => {
  fleet = await startNatsFleet(natsUrl, { prefixTag: 'ap' });
  ({ prefix, client, mesh } = fleet);
});

afterAll(() => fleet.stop());

describe('approvals over NATS', () => {
  it('approve: the run waits as awaiting_approval, the decision lets the call run once', async () => {
    await startPlanner('ap-planner-1');
    await submit('ap-nats-approve');
    const req = await requested('ap-nats-approve');
    expect(req).toMatchObject({ name: 'math.calc', args: { lhs: 6, rhs: 7, op: 'mul' } });
    await until('awaiting_approval in the run record', async () =>
      (await readRunRecord(client, 'ap-nats-approve', { prefix }))?.waiting === 'awaiting_approval'
        ? true
        : undefined,
    );
    expect(calcCalls('ap-nats-approve')).toBe(0);
    await sendApprovalDecision(
      client,
      'ap-nats-approve',
      { approval_id: req.approval_id, decision: 'approve', by: 'ops' },
      { prefix },
    );
    expect(await finalOf('ap-nats-approve')).toMatchObject({ status: 'done', tool_calls: 1 });
    expect(calcCalls('ap-nats-approve')).toBe(1);
    const record = await readRunRecord(client, 'ap-nats-approve', { prefix });
    expect(record?.waiting).toBeUndefined();
    await expect(
      sendApprovalDecision(
        client,
        'ap-nats-approve',
        { approval_id: req.approval_id, decision: 'deny' },
        { prefix },
      ),
    ).rejects.toMatchObject({ code: 'run_finished' });
  });

  it('a decision made while the planner holding the run is dead is applied by the one that resumes it', async () => {
    const a = await startPlanner('ap-planner-a');
    for (const p of fleet.planners.slice(0, -1)) await p.drain();
    await submit('ap-nats-takeover');
    const req = await requested('ap-nats-takeover');
    await a.bus.close();
    await startPlanner('ap-planner-b');
    await sendApprovalDecision(
      client,
      'ap-nats-takeover',
      { approval_id: req.approval_id, decision: 'approve', by: 'night-shift' },
      { prefix },
    );
    expect(await finalOf('ap-nats-takeover')).toMatchObject({ status: 'done', tool_calls: 1 });
    expect(calcCalls('ap-nats-takeover')).toBe(1);
    const all = await events('ap-nats-takeover');
    expect(all.filter((e) => e.type === 'approval.requested')).toHaveLength(1);
    expect(all.filter((e) => e.type === 'approval.decided')).toEqual([
      expect.objectContaining({ approval_id: req.approval_id, decision: 'approve', by: 'night-shift' }),
    ]);
    expect(all.some((e) => e.type === 'run.started' && e.resumed === true)).toBe(true);
  });

  it('two racing decisions: exactly one wins; bad input gets named errors', async () => {
    await submit('ap-nats-race');
    const req = await requested('ap-nats-race');
    await expect(
      sendApprovalDecision(
        client,
        'ap-nats-race',
        { approval_id: 'ap_unknown', decision: 'approve' },
        { prefix },
      ),
    ).rejects.toMatchObject({ code: 'not_found' });
    const malformed = await client.request(
      runControlSubjects(prefix).approve('ap-nats-race'),
      encodeJson({ approval_id: req.approval_id, decision: 'yes please' }),
    );
    expect(malformed.text()).toContain('invalid_message');
    const results = await Promise.allSettled(
      ['approve', 'deny', 'approve'].map((decision, i) =>
        sendApprovalDecision(
          client,
          'ap-nats-race',
          { approval_id: req.approval_id, decision: decision as 'approve' | 'deny', by: `u${i}` },
          { prefix },
        ),
      ),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results.filter((r) => r.status === 'rejected'))
      expect(r.status === 'rejected' && r.reason).toMatchObject({ code: 'already_decided' });
    await finalOf('ap-nats-race');
    expect((await events('ap-nats-race')).filter((e) => e.type === 'approval.decided')).toHaveLength(1);
  });

  it('timeout_ms ends the approval as denied with reason timeout; the model is told', async () => {
    await submit('ap-nats-timeout', { approvals: { require: ['math.calc'], timeout_ms: 300 } });
    expect(await finalOf('ap-nats-timeout')).toMatchObject({ status: 'done' });
    const all = await events('ap-nats-timeout');
    expect(all.find((e) => e.type === 'approval.decided')).toMatchObject({
      decision: 'deny',
      reason: 'timeout',
    });
    expect(all.find((e) => e.type === 'tool.failed')).toMatchObject({ error: { code: 'approval_denied' } });
    expect(calcCalls('ap-nats-timeout')).toBe(0);
  });

  it('the CLI: runs pending lists it, runs show says awaiting_approval, runs deny decides it once', async () => {
    const cli = (args: string[]) =>
      runAgentmesh(['runs', ...args, '--nats', natsUrl, '--prefix', prefix], { env: cleanEnv() });
    await submit('ap-nats-cli');
    const req = await requested('ap-nats-cli');
    await until('awaiting_approval', async () =>
      (await readRunRecord(client, 'ap-nats-cli', { prefix }))?.waiting === 'awaiting_approval'
        ? true
        : undefined,
    );
    const pending = await cli(['pending']);
    expect(pending.code).toBe(0);
    expect(pending.stdout).toMatch(new RegExp(`ap-nats-cli\\s+${req.approval_id}\\s+math\\.calc`));
    const show = await cli(['show', 'ap-nats-cli']);
    expect(show.stdout).toContain('(awaiting_approval)');
    const deny = await cli(['deny', 'ap-nats-cli', req.approval_id, '--reason', 'not today']);
    expect(deny).toMatchObject({ code: 0 });
    expect(deny.stdout).toContain(`denied ${req.approval_id} of run ap-nats-cli`);
    const final = await finalOf('ap-nats-cli');
    expect(final).toMatchObject({ status: 'done' });
    const failed = (await events('ap-nats-cli')).find((e) => e.type === 'tool.failed');
    expect(failed?.type === 'tool.failed' && failed.error.message).toContain('not today');
    const again = await cli(['approve', 'ap-nats-cli', req.approval_id]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/run_finished|already_decided/);
    const unknown = await cli(['approve', 'ap-nats-cli']);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain('needs a run id and an approval id');
  });

  it('pause, input and resume are durable: made while the holding planner is dead, applied once by the next', async () => {
    for (const p of fleet.planners) await p.drain();
    const a = await startPlanner('ctl-planner-a');
    const cli = (args: string[]) =>
      runAgentmesh(['runs', ...args, '--nats', natsUrl, '--prefix', prefix], { env: cleanEnv() });
    await sendRunControl(client, 'ctl-nats', { kind: 'pause' }, { prefix });
    await submitRun(client, { id: 'ctl-nats', task: 'wait for me', script: [{ text: 'ok' }] }, { prefix });
    await waitForRunEvent(client, 'ctl-nats', (e) => e.type === 'run.paused', { prefix });
    await until('paused in the run record', async () =>
      (await readRunRecord(client, 'ctl-nats', { prefix }))?.waiting === 'paused' ? true : undefined,
    );
    await a.bus.close();
    await startPlanner('ctl-planner-b');
    const input = await cli(['input', 'ctl-nats', 'please also be brief']);
    expect(input).toMatchObject({ code: 0 });
    expect((await cli(['resume', 'ctl-nats'])).code).toBe(0);
    expect(await finalOf('ctl-nats')).toMatchObject({ status: 'done' });
    const all = await events('ctl-nats');
    expect(all.filter((e) => e.type === 'run.input')).toEqual([
      expect.objectContaining({ text: 'please also be brief' }),
    ]);
    const types = all.map((e) => e.type);
    expect(types.indexOf('run.resumed')).toBeGreaterThan(types.indexOf('run.paused'));
    expect(types.indexOf('llm.request')).toBeGreaterThan(types.indexOf('run.input'));
    const late = await cli(['input', 'ctl-nats', 'too late']);
    expect(late.code).toBe(1);
    expect(late.stderr).toContain('run_finished');
  });
});
