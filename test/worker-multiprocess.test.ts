import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { connectBus, invokeTool, type Bus, type ToolProgress } from '@agentmesh/protocol';

// Runs the built packages: `npx tsc -b packages/tool-worker` first.
const FIXTURE = fileURLToPath(new URL('./fixtures/worker-process.mjs', import.meta.url));
const natsUrl = inject('natsUrl');
const prefix = `mp${process.pid}x${Date.now().toString(36)}`;

interface WorkerProcess {
  child: ChildProcess;
  workerId: string;
  lines: string[];
  exited: Promise<number | null>;
}

async function spawnWorker(): Promise<WorkerProcess> {
  const child = spawn(
    process.execPath,
    [
      FIXTURE,
      '--nats',
      natsUrl,
      '--prefix',
      prefix,
      '--tools',
      'builtin,test',
      '--threads',
      '1',
      '--no-register',
    ],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LOG_LEVEL: 'warn' },
    },
  );
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const lines: string[] = [];
  const ready = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker did not get ready in 15 s: ${stderr}`)), 15_000);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      lines.push(line);
      const msg = JSON.parse(line) as { ready?: boolean; worker_id?: string };
      if (msg.ready === true && msg.worker_id !== undefined) {
        clearTimeout(timer);
        resolve(msg.worker_id);
      }
    });
    void exited.then((code) => reject(new Error(`worker exited with ${code} before ready: ${stderr}`)));
  });
  return { child, workerId: await ready, lines, exited };
}

let bus: Bus;
let workers: WorkerProcess[] = [];
let seq = 0;
const call = (tool: string, args: unknown) => ({
  call_id: `mp-${++seq}`,
  run_id: 'run-mp',
  tool,
  arguments: args,
});

beforeAll(async () => {
  bus = await connectBus({ natsUrl });
  workers = await Promise.all([spawnWorker(), spawnWorker(), spawnWorker()]);
}, 60_000);

afterAll(async () => {
  for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL');
  await bus?.close();
});

/** Invokes a call and kill -9s the worker that announces `started` for it. */
async function invokeAndKill(tool: string, idempotent: boolean) {
  const killed: string[] = [];
  const seen: ToolProgress[] = [];
  const result = await invokeTool(bus, call(tool, { ms: 1500 }), {
    prefix,
    idempotent,
    lostAfterMs: 1500,
    timeoutMs: 20_000,
    onProgress: (p) => {
      seen.push(p);
      if (p.kind !== 'started' || killed.length > 0) return;
      const victim = workers.find((w) => w.workerId === p.worker_id);
      if (victim === undefined) return;
      killed.push(victim.workerId);
      victim.child.kill('SIGKILL');
    },
  }).then(
    (outcome) => ({ outcome, error: undefined }),
    (error: unknown) => ({ outcome: undefined, error }),
  );
  return { ...result, killed, seen };
}

describe('tool workers in separate processes on a real nats-server', () => {
  it('spreads 32 parallel calls across the replicas of a queue group', async () => {
    const outcomes = await Promise.all(
      Array.from({ length: 32 }, (_, i) =>
        invokeTool(bus, call('test.sleep', { ms: 40, tag: `t${i}` }), { prefix }),
      ),
    );
    outcomes.forEach((o, i) =>
      expect(o).toMatchObject({ is_error: false, output: { tag: `t${i}`, slept: 40 } }),
    );
    const ids = new Set(outcomes.map((o) => o.worker_id));
    expect(ids.size).toBeGreaterThanOrEqual(2);
    for (const id of ids) expect(workers.map((w) => w.workerId)).toContain(id);
    const sums = await Promise.all(
      Array.from({ length: 32 }, (_, i) =>
        invokeTool(bus, call('math.calc', { lhs: i, rhs: 1, op: 'add' }), { prefix }),
      ),
    );
    sums.forEach((o, i) => expect(o.output).toEqual({ result: i + 1 }));
  });

  it('re-sends an idempotent call to another replica when its worker is killed mid-call', async () => {
    const { outcome, error, killed, seen } = await invokeAndKill('test.sleep', true);
    expect(error).toBeUndefined();
    expect(killed).toHaveLength(1);
    expect(outcome).toMatchObject({ is_error: false, output: { slept: 1500 } });
    expect(outcome!.worker_id).not.toBe(killed[0]);
    expect(seen.filter((p) => p.kind === 'started').map((p) => p.worker_id)).toEqual([
      killed[0],
      outcome!.worker_id,
    ]);
  }, 30_000);

  it('never runs a non-idempotent call twice when its worker is killed: a clear non-retryable worker_lost', async () => {
    const { outcome, error, killed, seen } = await invokeAndKill('test.sleep_once', false);
    expect(killed).toHaveLength(1);
    const started = seen.filter((p) => p.kind === 'started');
    if (started[0]?.dedup === 'shared') {
      // the workers share an outcome store: the call is re-sent and the replica that gets it refuses it, since the
      // killed worker claimed it and stopped without an outcome (a success here would mean a second run)
      expect(error).toBeUndefined();
      expect(outcome).toMatchObject({
        is_error: true,
        dedup: 'shared',
        error: { code: 'worker_lost', retryable: false, details: { first_worker_id: killed[0] } },
      });
      expect(outcome!.worker_id).not.toBe(killed[0]);
      expect(outcome!.error!.message).toMatch(/may have run/);
    } else {
      expect(outcome).toBeUndefined();
      expect(error).toMatchObject({
        code: 'worker_lost',
        retryable: false,
        details: { worker_id: killed[0], tool: 'test.sleep_once' },
      });
      expect((error as Error).message).toMatch(/may have run/);
    }
  }, 30_000);

  it('drains on SIGTERM: the call in flight completes, then the process exits 0', async () => {
    const survivor = workers.find((w) => w.child.exitCode === null && w.child.signalCode === null)!;
    const pending = invokeTool(bus, call('test.sleep', { ms: 600 }), {
      prefix,
      onProgress: (p) => {
        if (p.kind === 'started') survivor.child.kill('SIGTERM');
      },
    });
    const outcome = await pending;
    expect(outcome).toMatchObject({ is_error: false, worker_id: survivor.workerId });
    expect(await survivor.exited).toBe(0);
    expect(survivor.lines.some((l) => l.includes('"drained":true'))).toBe(true);
  }, 30_000);
});
