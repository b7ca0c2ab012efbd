/**
 * Issue 38, `agentmesh eval --nats`: the cases of a dataset run as ordinary runs on a fleet of two planners (each
 * taking one run at a time, so both must work) and a worker on a real nats-server, judged by the CLI.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { readRunEvents, sendApprovalDecision } from '@agentmesh/planner';
import { CLI, REPO_ROOT, cleanEnv, runAgentmesh } from './helpers/cli.js';
import { startNatsFleet, type NatsFleet } from './helpers/fleet.js';

const natsUrl = inject('natsUrl');
let fleet: NatsFleet;
const dir = mkdtempSync(join(tmpdir(), 'am-eval-fleet-'));
const CASES = 8;

/** Case i adds i and 1 with math.calc (on the fleet's worker), after a short think; the last case expects wrong. */
function dataset(): string {
  return Array.from({ length: CASES }, (_, i) =>
    JSON.stringify({
      id: `sum-${i}`,
      task: `What is ${i} + 1?`,
      tools: ['math.*'],
      script: [
        { delay_ms: 150, tool_calls: [{ name: 'math.calc', arguments: { lhs: i, rhs: 1, op: 'add' } }] },
        { text: `${i} + 1 = ${i + 1}` },
      ],
      expect: {
        contains: i === CASES - 1 ? 'wrong' : `= ${i + 1}`,
        tool_called: 'math.calc',
        max_tool_calls: 1,
        max_turns: 2,
      },
    }),
  ).join('\n');
}

beforeAll(async () => {
  fleet = await startNatsFleet(natsUrl, { prefixTag: 'eval' });
  await fleet.planner('eval-planner-a', { maxConcurrentRuns: 1 });
  await fleet.planner('eval-planner-b', { maxConcurrentRuns: 1 });
});

afterAll(() => fleet?.stop());

describe('agentmesh eval --nats', () => {
  it('spreads the cases across both planners, runs their tools on the worker and judges each', async () => {
    const file = join(dir, 'fleet.jsonl');
    writeFileSync(file, dataset());
    const out = join(dir, 'out');
    const r = await runAgentmesh(
      [
        'eval',
        file,
        '--nats',
        natsUrl,
        '--prefix',
        fleet.prefix,
        '--concurrency',
        '4',
        '--json',
        '--out',
        out,
      ],
      { env: cleanEnv(), timeoutMs: 120_000 },
    );
    expect(r.stderr).not.toMatch(/warning|error/i);
    expect(r.code).toBe(1);
    const printed = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const cases = printed.filter((l) => l['type'] === 'case');
    expect(cases).toHaveLength(CASES);
    expect(cases.filter((c) => c['pass'] === false).map((c) => c['id'])).toEqual([`sum-${CASES - 1}`]);
    expect(printed.at(-1)).toMatchObject({ type: 'summary', total: CASES, passed: CASES - 1, failed: 1 });
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as {
      cases: { id: string; run_id: string; planner_id?: string }[];
    };
    const planners = new Set(report.cases.map((c) => c.planner_id));
    expect([...planners].sort()).toEqual(['eval-planner-a', 'eval-planner-b']);
    expect(fleet.mesh.invocations).toHaveLength(CASES);
    for (const c of report.cases) {
      const events = await readRunEvents(fleet.client, c.run_id, { prefix: fleet.prefix });
      expect(events.find((e) => e.type === 'run.started')).toMatchObject({ planner_id: c.planner_id });
      expect(events.at(-1)).toMatchObject({ type: 'run.completed', status: 'done', tool_calls: 1 });
    }
  }, 180_000);
});

describe('agentmesh eval --nats, a case that needs approval', () => {
  it('names the approval and how to decide it, and goes on once it is approved', async () => {
    const file = join(dir, 'approval.jsonl');
    const line = JSON.parse(dataset().split('\n')[0]!) as Record<string, unknown>;
    writeFileSync(file, JSON.stringify({ ...line, approvals: { require: ['math.calc'] } }));
    const child = spawn(process.execPath, [CLI, 'eval', file, '--nats', natsUrl, '--prefix', fleet.prefix], {
      cwd: REPO_ROOT,
      env: cleanEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    const asked = new Promise<RegExpExecArray>((resolve) =>
      child.stderr.on('data', (d: Buffer) => {
        stderr += d.toString();
        const m = /run (eval-[\w-]+) waits for approval (\S+) \(.*\): agentmesh runs approve \1 \2/.exec(
          stderr,
        );
        if (m) resolve(m);
      }),
    );
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    onTestFinished(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    const [, runId, approvalId] = await asked;
    await sendApprovalDecision(
      fleet.client,
      runId!,
      { approval_id: approvalId!, decision: 'approve', by: 'test' },
      { prefix: fleet.prefix },
    );
    expect(await exited).toBe(0);
    expect(stdout).toContain('1 of 1 passed (100%)');
  }, 120_000);
});

describe('agentmesh eval --nats with no planner taking runs', () => {
  let idle: NatsFleet;

  beforeAll(async () => {
    idle = await startNatsFleet(natsUrl, { prefixTag: 'eval-idle' });
    const { planner } = await idle.planner('eval-idle-planner');
    await planner.drain();
  });

  afterAll(() => idle?.stop());

  it('says it waits for a planner, and Ctrl-C stops following the runs and reports them failed', async () => {
    const file = join(dir, 'idle.jsonl');
    writeFileSync(file, dataset());
    const child = spawn(
      process.execPath,
      [CLI, 'eval', file, '--nats', natsUrl, '--prefix', idle.prefix, '--concurrency', '2'],
      { cwd: REPO_ROOT, env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    const hinted = new Promise<void>((resolve) =>
      child.stderr.on('data', (d: Buffer) => {
        stderr += d.toString();
        if (stderr.includes('waiting for a planner to take run')) resolve();
      }),
    );
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    onTestFinished(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    await hinted;
    expect(stderr.match(/waiting for a planner/g)).toHaveLength(1);
    child.kill('SIGINT');
    expect(await exited).toBe(1);
    expect(stdout).toMatch(/default\s+0\/2\s+0%/);
    expect(stderr).toContain(
      `agentmesh eval: interrupted: 2 of ${CASES} runs finished; the rest did not run`,
    );
    expect(stdout).toMatch(/status: expected done, got failed \(cancelled: stopped following run eval-/);
  }, 120_000);
});
