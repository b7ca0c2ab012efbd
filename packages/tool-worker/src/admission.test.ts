import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  MemoryBus,
  NOOP_METRICS,
  createActorMetrics,
  invokeTool,
  setProcessMetrics,
  silentLogger,
  startMetricsServer,
  type MetricsServer,
  type ToolProgress,
} from '@agentmesh/protocol';
import { Admission } from './admission.js';
import { CpuPool } from './cpu-pool.js';
import { defineTool } from './define-tool.js';
import { ToolWorker } from './worker.js';

const GATE_TASK = new URL('../../../test/fixtures/cpu-gate-task.mjs', import.meta.url);

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const undo of cleanup.splice(0).reverse()) await undo();
});

async function scrapeQueueDepth(server: MetricsServer): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${server.port}/metrics`)).text();
  const line = /^agentmesh_admission_queue_depth(?:\{[^}]*\})? (\S+)$/m.exec(text);
  if (line === null) throw new Error(`no agentmesh_admission_queue_depth in:\n${text}`);
  return Number(line[1]);
}

describe('admission queue depth gauge', () => {
  it('counts CPU calls admitted and waiting for a thread, as served at /metrics', async () => {
    const metrics = createActorMetrics('tool-worker');
    setProcessMetrics(metrics);
    const server = await startMetricsServer(metrics, { port: 0, host: '127.0.0.1' });
    cleanup.push(
      () => void setProcessMetrics(NOOP_METRICS),
      () => server.close(),
    );
    const dir = mkdtempSync(join(tmpdir(), 'agentmesh-gate-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const gate = join(dir, 'open');

    const tool = defineTool({
      name: 'test.gate',
      description: 'Holds a CPU thread until the gate file exists.',
      input: z.object({ gate: z.string() }),
      idempotent: true,
      timeoutMs: 60_000,
      cpu: { module: GATE_TASK, export: 'waitForGate' },
    });
    const bus = new MemoryBus();
    const worker = new ToolWorker({
      bus,
      tools: [tool],
      logger: silentLogger(),
      register: false,
      threads: 1,
      cpuQueueDepth: 2,
    });
    await worker.start();
    cleanup.push(() => worker.drain());

    const calls = Array.from({ length: 3 }, (_, i) => {
      let started!: () => void;
      const seen = new Promise<void>((resolve) => (started = resolve));
      const outcome = invokeTool(
        bus,
        { call_id: `gate-${i}`, run_id: 'run-gate', tool: 'test.gate', arguments: { gate } },
        { onProgress: (p: ToolProgress) => p.kind === 'started' && started() },
      );
      return { seen, outcome };
    });
    await Promise.all(calls.map((c) => c.seen));
    expect(worker.inFlight).toBe(3);
    expect(await scrapeQueueDepth(server)).toBe(2);

    writeFileSync(gate, '');
    const outcomes = await Promise.all(calls.map((c) => c.outcome));
    expect(outcomes.every((o) => !o.is_error)).toBe(true);
    expect(await scrapeQueueDepth(server)).toBe(0);
  }, 60_000);
});

describe('refusals and capacity notices in the metrics', () => {
  it('counts the calls a worker answered busy and the notices it sent, per tool', async () => {
    const metrics = createActorMetrics('tool-worker');
    setProcessMetrics(metrics);
    cleanup.push(() => void setProcessMetrics(NOOP_METRICS));
    const bus = new MemoryBus();
    const nap = defineTool({
      name: 'test.nap',
      description: 'Sleeps for ms.',
      input: z.object({ ms: z.number() }),
      idempotent: true,
      handler: async ({ ms }) => new Promise((resolve) => setTimeout(() => resolve({ ms }), ms)),
    });
    const worker = new ToolWorker({
      bus,
      tools: [nap],
      logger: silentLogger(),
      register: false,
      concurrency: 1,
    });
    await worker.start();
    cleanup.push(() => worker.drain());
    const calls = [50, 1].map((ms, i) =>
      invokeTool(bus, { call_id: `nap-${i}`, run_id: 'run-nap', tool: 'test.nap', arguments: { ms } }),
    );
    expect((await Promise.all(calls)).every((o) => !o.is_error)).toBe(true);
    const text = await metrics.scrape();
    const count = (name: string) =>
      Number(new RegExp(`^${name}\\{tool="test\\.nap"[^}]*\\} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
    expect(count('agentmesh_tool_calls_refused_total')).toBeGreaterThanOrEqual(1);
    expect(count('agentmesh_capacity_notices_total')).toBeGreaterThanOrEqual(1);
  });
});

describe('Admission owes the callers it turned away a word once it has room', () => {
  it('owes the tools it refused, tells them once when a call leaves, and never while draining', () => {
    const admission = new Admission('w1', 2);
    admission.state = 'running';
    expect(admission.admit('t.a', undefined)).toBeUndefined();
    expect(admission.leave()).toBeUndefined();

    // at its limit without turning anyone away: a fast tool owes nothing (that would be a notice per call)
    expect(admission.admit('t.a', undefined)).toBeUndefined();
    expect(admission.admit('t.a', undefined)).toBeUndefined();
    expect(admission.leave()).toBeUndefined();
    expect(admission.admit('t.a', undefined)).toBeUndefined();
    expect(admission.admit('t.b', undefined)).toMatchObject({
      code: 'busy',
      retryable: true,
      details: { worker_id: 'w1', tool: 't.b', offers: true },
    });
    expect(admission.admit('t.c', undefined)).toMatchObject({ code: 'busy' });
    expect(admission.leave()).toEqual([
      { tool: 't.b', free: 1 },
      { tool: 't.c', free: 1 },
    ]);
    expect(admission.leave()).toBeUndefined();

    expect(admission.admit('t.a', undefined)).toBeUndefined();
    expect(admission.admit('t.a', undefined)).toBeUndefined();
    admission.state = 'draining';
    expect(admission.admit('t.c', undefined)?.details).toEqual({ worker_id: 'w1', tool: 't.c' });
    expect(admission.leave()).toBeUndefined();
    expect(admission.leave()).toBeUndefined();
  });

  it('keeps telling while calls it turned away are unanswered, one notice per freed slot', () => {
    const admission = new Admission('w1', 1);
    admission.state = 'running';
    expect(admission.admit('t.q', undefined)).toBeUndefined();
    for (let i = 0; i < 3; i++) expect(admission.admit('t.q', undefined)).toMatchObject({ code: 'busy' });
    for (let i = 0; i < 3; i++) {
      expect(admission.leave()).toEqual([{ tool: 't.q', free: 1 }]);
      expect(admission.admit('t.q', undefined)).toBeUndefined();
    }
    expect(admission.leave()).toBeUndefined();
  });

  it('tells the callers of a CPU-bound tool only once its thread pool has room', () => {
    let room = 0;
    const pool = {
      threads: 1,
      get saturated() {
        return room <= 0;
      },
      room: () => room,
      waiting: () => 0,
      hold: () => undefined,
      release: () => undefined,
    } as unknown as CpuPool;
    const admission = new Admission('w1', 8);
    admission.state = 'running';
    room = 1;
    expect(admission.admit('t.cpu', pool)).toBeUndefined();
    room = 0;
    expect(admission.admit('t.cpu', pool)).toMatchObject({ code: 'busy', details: { offers: true } });
    expect(admission.leave()).toBeUndefined();
    expect(admission.admit('t.io', undefined)).toBeUndefined();
    room = 2;
    expect(admission.leave()).toEqual([{ tool: 't.cpu', free: 2 }]);
  });

  it('queues a CPU call sent by name in the named overflow, and names its own subject only while that has room', () => {
    // 1 thread, 1 queued, 2 more by name; no thread starts: admission alone fills it
    const pool = new CpuPool({ threads: 1, queueDepth: 1 });
    const admission = new Admission('w1', 8);
    admission.state = 'running';
    const shared = { invoke: 't.cpu.Wme', byName: false };
    const byName = { invoke: 't.cpu.Wme', byName: true };
    for (let i = 0; i < 2; i++) expect(admission.admit('t.cpu', pool, shared)).toBeUndefined();
    expect(admission.admit('t.cpu', pool, shared)).toMatchObject({
      code: 'busy',
      details: { worker_id: 'w1', offers: true, invoke: 't.cpu.Wme' },
    });
    expect(admission.admit('t.cpu', pool, byName)).toBeUndefined();
    expect(admission.admit('t.cpu', pool, byName)).toBeUndefined();
    const full = admission.admit('t.cpu', pool, byName);
    expect(full).toMatchObject({ code: 'busy', details: { offers: true } });
    expect(full?.details).not.toHaveProperty('invoke');
    expect(admission.admit('t.cpu', pool, shared)?.details).not.toHaveProperty('invoke');
    // room again only once the calls beyond threads and queue have left
    for (let i = 0; i < 2; i++) expect(admission.leave(pool)).toBeUndefined();
    expect(admission.leave(pool)).toEqual([{ tool: 't.cpu', free: 1 }]);
  });

  it('counts a burst of CPU calls admitted in one turn against the pool before any of them runs', () => {
    const pool = new CpuPool({ threads: 1, queueDepth: 1 });
    const admission = new Admission('w1', 64);
    admission.state = 'running';
    const answers = Array.from({ length: 8 }, () => admission.admit('t.cpu', pool));
    expect(answers.filter((a) => a === undefined)).toHaveLength(2);
    expect(pool.waiting()).toBe(1);
    expect(admission.leave(pool)).toEqual([{ tool: 't.cpu', free: 1 }]);
    expect(pool.room()).toBe(1);
  });
});
