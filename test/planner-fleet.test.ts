import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { NatsBus, streamNames, subjects, type RunEvent } from '@agentmesh/protocol';
import { readRunRecord } from '@agentmesh/planner';
import { calcTool, startFakeMesh, type FakeMesh } from './fixtures/llm/mesh.js';
import { dropPrefix, uniquePrefix } from './fixtures/llm/nats.js';
import { until } from './helpers/wait.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const natsUrl = inject('natsUrl');
const prefix = uniquePrefix('pf');
const s = subjects(prefix);
const children: ChildProcess[] = [];
let bus: NatsBus;
let nc: NatsConnection;
let catalog: FakeMesh;
const workerIds: string[] = [];

function spawnActor(file: string, env: Record<string, string>): Promise<string> {
  const child = spawn(process.execPath, [fileURLToPath(new URL(`./fixtures/llm/${file}`, import.meta.url))], {
    cwd: root,
    env: { ...process.env, NATS_URL: natsUrl, AGENTMESH_PREFIX: prefix, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const line = out.split('\n').find((l) => l.startsWith('ready'));
      if (line) resolve(line);
    });
    child.once('exit', (code) => reject(new Error(`${file} exited with ${code} before it was ready`)));
  });
}

beforeAll(async () => {
  for (const pkg of ['protocol', 'planner', 'tool-worker'])
    if (!existsSync(`${root}/packages/${pkg}/dist/index.js`))
      throw new Error(
        `packages/${pkg} is not built: run "npx tsc -b packages/${pkg}" (child processes run built code)`,
      );
  bus = await NatsBus.connect(natsUrl);
  nc = await connect({ servers: natsUrl });
  // the catalog answers from the test process; the tools are served by the real workers in their processes
  catalog = startFakeMesh(bus, [calcTool], { prefix, serveTools: false });
  const ready = await Promise.all([
    spawnActor('planner-process.mjs', { PLANNER_ID: 'planner-a' }),
    spawnActor('planner-process.mjs', { PLANNER_ID: 'planner-b' }),
    spawnActor('worker-process.mjs', {}),
    spawnActor('worker-process.mjs', {}),
  ]);
  workerIds.push(...ready.slice(2).map((line) => line.split(' ')[1]!));
}, 60_000);

afterAll(async () => {
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null) return resolve();
          const kill = setTimeout(() => c.kill('SIGKILL'), 5_000);
          c.once('exit', () => {
            clearTimeout(kill);
            resolve();
          });
          c.kill('SIGTERM');
        }),
    ),
  );
  catalog?.stop();
  await nc?.close();
  if (bus) {
    await dropPrefix(bus, prefix);
    await bus.close();
  }
});

describe('two planners and two workers as separate processes', () => {
  it('completes 20 runs submitted as raw JSON by a plain NATS client, each handled once, tool calls on both workers', async () => {
    const events = new Map<string, RunEvent[]>();
    const finals = new Map<string, RunEvent>();
    let allDone!: () => void;
    const done = new Promise<void>((r) => (allDone = r));
    nc.subscribe(s.allRunEvents, {
      callback: (_err, msg) => {
        const e = msg.json<RunEvent>();
        events.set(e.run_id, [...(events.get(e.run_id) ?? []), e]);
        if (e.type === 'run.completed' || e.type === 'run.failed') {
          finals.set(e.run_id, e);
          if (finals.size === 20) allDone();
        }
      },
    });
    await nc.flush();
    const ids = Array.from({ length: 20 }, (_, i) => `fleet-${i}`);
    const acks = await Promise.all(
      ids.map(async (id, i) => {
        const request = {
          id,
          task: `sum for run ${i}`,
          script: [
            {
              tool_calls: [0, 1, 2, 3].map((k) => ({
                name: 'math__calc',
                arguments: { lhs: i, rhs: k, op: 'add' },
              })),
            },
            { text: `done ${i}` },
          ],
        };
        const reply = await nc.request(s.runsSubmit, JSON.stringify(request), { timeout: 5_000 });
        return reply.json<{ stream: string; seq: number }>();
      }),
    );
    expect(acks.every((a) => a.stream === streamNames(prefix).runs)).toBe(true);
    await Promise.race([
      done,
      new Promise((_, reject) =>
        setTimeout(() => reject(new Error(`only ${finals.size} of 20 runs finished`)), 30_000),
      ),
    ]);

    const plannersUsed = new Set<string>();
    const workersUsed = new Set<string>();
    for (const [i, id] of ids.entries()) {
      const runEvents = events.get(id)!;
      expect(finals.get(id)).toMatchObject({
        type: 'run.completed',
        status: 'done',
        text: `done ${i}`,
        tool_calls: 4,
      });
      expect(runEvents.map((e) => e.seq)).toEqual(runEvents.map((_, k) => k + 1));
      const started = runEvents.filter((e) => e.type === 'run.started');
      expect(started).toHaveLength(1);
      plannersUsed.add(started[0]!.type === 'run.started' ? started[0]!.planner_id : '');
      const completed = runEvents.filter((e) => e.type === 'tool.completed');
      const byCall = Object.fromEntries(
        completed.map((e) => (e.type === 'tool.completed' ? [e.call_id, JSON.parse(e.preview)] : [])),
      );
      expect(byCall).toEqual(
        Object.fromEntries([0, 1, 2, 3].map((k) => [`call_1_${k + 1}`, { result: i + k }])),
      );
      for (const e of completed) if (e.type === 'tool.completed') workersUsed.add(e.worker_id);
      // a run's record says finished just after its last event (the durable order of a run's end)
      const record = await until(`the record of ${id} finished`, async () => {
        const r = await readRunRecord(bus, id, { prefix });
        return r?.state === 'finished' && r;
      });
      expect(record).toMatchObject({ state: 'finished', status: 'done' });
    }
    expect([...plannersUsed].every((p) => p === 'planner-a' || p === 'planner-b')).toBe(true);
    expect([...workersUsed].sort()).toEqual([...workerIds].sort());
  });
});
