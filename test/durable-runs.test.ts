/**
 * Issue 8: durable runs, with real processes on a real nats-server. 100 runs in flight, each with several tool calls
 * (one of them the non-idempotent `ledger.append`, which writes a line per execution); kill -9 of a planner twice at
 * different points, kill -9 of a worker, and a nats-server restart with the same store, all during the load. Every
 * run ends `done` with the right answer, no non-idempotent call ran twice, and each run's events are gapless.
 * Figures (runs/s, failover time) go to test/.results/durable-runs.json.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NatsBus, type RunEvent } from '@agentmesh/protocol';
import { readRunEvents, readRunRecord, readTranscript, submitRun } from '@agentmesh/planner';
import { startNatsServer, type NatsServerHandle } from './helpers/nats-server.js';
import { CLI, REPO_ROOT, cleanEnv, startActor, type ActorProcess } from './helpers/cli.js';

const RUNS = 100;
const TURN_DELAY_MS = 1_500;
const LEDGER_MS = 400;
const WORKER = join(REPO_ROOT, 'test', 'fixtures', 'durable-worker.mjs');

/** Run i: 3 tool turns (math + ledger, sha256 + ledger, ledger), then the answer. */
function runRequest(i: number, id: string) {
  const ledger = (tag: string) => ({
    name: 'ledger.append',
    arguments: { entry: `${tag}-${i}`, ms: LEDGER_MS },
  });
  return {
    id,
    task: `run ${i}`,
    provider: 'scripted' as const,
    tools: ['math', 'crypto', 'ledger'],
    script: [
      {
        delay_ms: TURN_DELAY_MS,
        tool_calls: [{ name: 'math.calc', arguments: { lhs: i, rhs: 7, op: 'mul' } }, ledger('a')],
      },
      {
        delay_ms: TURN_DELAY_MS,
        tool_calls: [{ name: 'crypto.sha256', arguments: { text: id } }, ledger('b')],
      },
      { delay_ms: TURN_DELAY_MS, tool_calls: [ledger('c')] },
      { text: `done ${i}` },
    ],
    limits: { timeout_ms: 120_000 },
  };
}

function startWorker(env: NodeJS.ProcessEnv): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WORKER], {
      cwd: REPO_ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('"ready":true')) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`durable-worker exited with ${code}: ${out}`)));
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Progress {
  ledgerStarted: Record<string, number>;
  ledgerDone: Record<string, number>;
  thirdTurns: number;
}

/** Follows the runs' events (core subscription) and resolves `reach` once the progress meets a condition. */
function watchProgress(bus: NatsBus, prefix: string) {
  const progress: Progress = {
    ledgerStarted: { a: 0, b: 0, c: 0 },
    ledgerDone: { a: 0, b: 0, c: 0 },
    thirdTurns: 0,
  };
  const tags = new Map<string, string>();
  const waiters = new Set<() => void>();
  const sub = bus.subscribe(`agentmesh.runs.*.events`, (msg) => {
    const e = JSON.parse(msg.text()) as RunEvent;
    if (!e.run_id.startsWith(prefix)) return;
    if (e.type === 'llm.response') {
      if (e.iteration === 3) progress.thirdTurns++;
      for (const c of e.tool_calls)
        if (c.name === 'ledger.append')
          tags.set(`${e.run_id} ${c.id}`, String((c.arguments as { entry: string }).entry).split('-')[0]!);
    }
    const tag = 'call_id' in e ? tags.get(`${e.run_id} ${e.call_id}`) : undefined;
    if (tag !== undefined && e.type === 'tool.started') progress.ledgerStarted[tag]!++;
    if (tag !== undefined && e.type === 'tool.completed') progress.ledgerDone[tag]!++;
    for (const w of [...waiters]) w();
  });
  return {
    reach: (what: string, condition: (p: Progress) => boolean, timeoutMs = 60_000) =>
      new Promise<void>((resolve, reject) => {
        const check = () => {
          if (!condition(progress)) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out waiting for ${what}: ${JSON.stringify(progress)}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      }),
    stop: () => sub.unsubscribe(),
  };
}

describe('durable runs under faults: 100 runs, planners and a worker killed, nats-server restarted', () => {
  let nats: NatsServerHandle;
  let bus: NatsBus;
  let dir: string;
  let ledgerFile: string;
  let env: NodeJS.ProcessEnv;
  const actors: ActorProcess[] = [];
  const workers: ChildProcess[] = [];

  beforeAll(async () => {
    for (const pkg of ['cli', 'planner', 'tool-worker'])
      if (!existsSync(join(REPO_ROOT, 'packages', pkg, 'dist', 'index.js')) && !existsSync(CLI))
        throw new Error(`packages/${pkg} is not built: run "npx tsc -b packages/cli"`);
    nats = await startNatsServer();
    dir = mkdtempSync(join(tmpdir(), 'agentmesh-durable-'));
    ledgerFile = join(dir, 'ledger.txt');
    writeFileSync(ledgerFile, '');
    env = cleanEnv({ NATS_URL: nats.url, DURABLE_LEDGER: ledgerFile, LOG_LEVEL: 'warn' });
    actors.push(await startActor(['catalog'], env));
    actors.push(...(await Promise.all([0, 1, 2].map(() => startActor(['planner'], env)))));
    workers.push(...(await Promise.all([0, 1].map(() => startWorker(env)))));
    bus = await NatsBus.connect(nats.url, { name: 'durable-test' });
  }, 90_000);

  afterAll(async () => {
    await bus?.close().catch(() => undefined);
    for (const w of workers) if (w.exitCode === null && w.signalCode === null) w.kill('SIGTERM');
    await Promise.all(actors.map((a) => a.stop()));
    await nats?.dispose();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('every run ends done with the right answer, no non-idempotent call runs twice, events stay gapless', async () => {
    const prefix = `d${Date.now().toString(36)}`;
    const ids = Array.from({ length: RUNS }, (_, i) => `${prefix}-${i}`);
    const started = Date.now();
    const progress = watchProgress(bus, prefix);
    for (const [i, id] of ids.entries()) await submitRun(bus, runRequest(i, id));

    // each fault waits for a point in the runs' progress (seen in their events), not for a fixed time
    const faults: string[] = [];
    await progress.reach(
      'half the runs in their first ledger call',
      (p) => (p.ledgerStarted.a ?? 0) >= RUNS / 2,
    );
    process.kill(actors[1]!.child.pid!, 'SIGKILL');
    faults.push(`planner 1 killed at ${Date.now() - started} ms (turn 1-2)`);
    actors.push(await startActor(['planner'], env));
    await progress.reach('ledger calls of turn 2 in flight', (p) => (p.ledgerStarted.b ?? 0) >= 10);
    process.kill(workers[0]!.pid!, 'SIGKILL');
    faults.push(`worker 1 killed at ${Date.now() - started} ms`);
    workers.push(await startWorker(env));
    await progress.reach('runs in their third model turn', (p) => p.thirdTurns >= 10);
    process.kill(actors[2]!.child.pid!, 'SIGKILL');
    faults.push(`planner 2 killed at ${Date.now() - started} ms (turn 2-3)`);
    await progress.reach('ledger calls of turn 3 done', (p) => (p.ledgerDone.c ?? 0) >= 10);
    progress.stop();
    await nats.restart(500);
    faults.push(`nats-server restarted at ${Date.now() - started} ms`);

    const finals = new Map<string, { status?: string; text?: string; type: string }>();
    const deadline = Date.now() + 75_000;
    while (finals.size < RUNS && Date.now() < deadline) {
      for (const id of ids) {
        if (finals.has(id)) continue;
        const record = await readRunRecord(bus, id).catch(() => null);
        if (record?.state === 'finished') {
          const events = await readRunEvents(bus, id).catch(() => []);
          const last = events.at(-1);
          if (last?.type === 'run.completed' || last?.type === 'run.failed') finals.set(id, last);
        }
      }
      if (finals.size < RUNS) await sleep(1_000);
    }
    const elapsedS = (Date.now() - started) / 1000;
    const unfinished = ids.filter((id) => !finals.has(id));
    if (unfinished.length > 0) {
      const sample = unfinished[0]!;
      const events = await readRunEvents(bus, sample).catch((e: unknown) => [String(e)]);
      console.error(
        `${unfinished.length} runs unfinished; ${sample}:`,
        JSON.stringify(await readRunRecord(bus, sample).catch(() => null)),
        JSON.stringify(events).slice(0, 3000),
        actors.map((a) => a.logs().slice(-1500)).join('\n----\n'),
      );
    }
    expect(unfinished).toEqual([]);

    const executions = new Map<string, number>();
    for (const line of readFileSync(ledgerFile, 'utf8').split('\n')) {
      const [run, call] = line.split(' ');
      if (run && call) executions.set(`${run} ${call}`, (executions.get(`${run} ${call}`) ?? 0) + 1);
    }
    expect([...executions].filter(([, n]) => n > 1)).toEqual([]);

    const failovers: number[] = [];
    let resumedRuns = 0;
    let ledgerLost = 0;
    let ledgerRefusedByWorker = 0;
    for (const [i, id] of ids.entries()) {
      const final = finals.get(id)!;
      expect(final, id).toMatchObject({ type: 'run.completed', status: 'done', text: `done ${i}` });
      const events: RunEvent[] = await readRunEvents(bus, id);
      expect(
        events.map((e) => e.seq),
        id,
      ).toEqual(events.map((_, k) => k + 1));
      expect(events.filter((e) => e.type === 'run.accepted')).toHaveLength(1);
      const takeovers = events.filter((e) => e.type === 'run.started' && e.resumed === true);
      if (takeovers.length > 0) resumedRuns++;
      for (const t of takeovers) {
        const before = events[t.seq - 2]!;
        failovers.push(Date.parse(t.ts) - Date.parse(before.ts));
      }
      const transcript = await readTranscript(bus, id);
      expect(transcript?.status, id).toBe('done');
      const tools = transcript!.messages.filter((m) => m.role === 'tool');
      expect(tools.map((m) => m.name)).toEqual([
        'math.calc',
        'ledger.append',
        'crypto.sha256',
        'ledger.append',
        'ledger.append',
      ]);
      expect(tools[0]!.content, id).toContain(String(i * 7));
      expect(tools[2]!.content, id).toContain(createHash('sha256').update(id).digest('hex'));
      for (const m of tools.filter((t) => t.name === 'ledger.append')) {
        const ran = executions.get(`${id} ${m.role === 'tool' ? m.call_id : ''}`) ?? 0;
        if (m.role === 'tool' && m.is_error) {
          // a worker died during the call: a clear error, never a second execution
          expect(m.content, id).toMatch(/worker_lost|may have run/);
          ledgerLost++;
          if (/already started by worker/.test(m.content)) ledgerRefusedByWorker++;
        } else expect(ran, `${id} ${m.content}`).toBe(1);
      }
    }
    expect(resumedRuns).toBeGreaterThan(0);

    failovers.sort((a, b) => a - b);
    const figures = {
      runs: RUNS,
      elapsed_s: Math.round(elapsedS * 10) / 10,
      runs_per_second: Math.round((RUNS / elapsedS) * 100) / 100,
      resumed_runs: resumedRuns,
      failover_ms_p50: failovers[Math.floor(failovers.length / 2)],
      failover_ms_max: failovers.at(-1),
      ledger_calls: executions.size,
      ledger_calls_lost_with_worker: ledgerLost,
      ledger_calls_refused_as_may_have_run: ledgerRefusedByWorker,
      faults,
    };
    mkdirSync(join(REPO_ROOT, 'test', '.results'), { recursive: true });
    writeFileSync(join(REPO_ROOT, 'test', '.results', 'durable-runs.json'), JSON.stringify(figures, null, 2));
    console.log('durable runs figures', figures);
  }, 120_000);
});
