/**
 * Issue 34: a tool worker in Python (examples/python-worker/worker.py, written from docs/reference/workers.md) on a
 * real fleet: it registers with the catalog, heartbeats (and so outlives its TTL), answers a planner run's call of
 * py.reverse, and stops a call when its run is cancelled. Needs python3 with nats-py (CI installs it; in CI the test
 * fails rather than pass without it).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { CatalogListReplySchema, NatsBus, requestJson, subjects, type RunEvent } from '@agentmesh/protocol';
import { cancelRun, submitRun } from '@agentmesh/planner';
import { dropPrefix, uniquePrefix } from './fixtures/llm/nats.js';
import { REPO_ROOT, cleanEnv, startActor, type ActorProcess } from './helpers/cli.js';
import { until, waitForRunEnd, waitForRunEvent } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
const python = spawnSync('python3', ['-c', 'import nats'], { stdio: 'ignore' }).status === 0;
const TTL_MS = 600;

describe.runIf(python || process.env['CI'] !== undefined)('a tool worker in Python', () => {
  const prefix = uniquePrefix('py');
  const actors: ActorProcess[] = [];
  let worker: ChildProcess;
  let workerLog = '';
  let client: NatsBus;

  beforeAll(async () => {
    expect(python, 'python3 with nats-py (pip install nats-py==2.15.0)').toBe(true);
    client = await NatsBus.connect(natsUrl);
    const env = cleanEnv({ NATS_URL: natsUrl, AGENTMESH_PREFIX: prefix });
    actors.push(await startActor(['catalog'], env), await startActor(['planner'], env));
    worker = spawn(
      'python3',
      [
        join(REPO_ROOT, 'examples/python-worker/worker.py'),
        '--nats',
        natsUrl,
        '--prefix',
        prefix,
        '--ttl-ms',
        String(TTL_MS),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    worker.stdout!.on('data', (d: Buffer) => (workerLog += d.toString()));
    worker.stderr!.on('data', (d: Buffer) => (workerLog += d.toString()));
    await until('the Python worker registered', () => workerLog.includes('"event": "ready"'), 20_000);
  }, 60_000);

  afterAll(async () => {
    worker?.kill('SIGTERM');
    for (const a of actors) await a.stop();
    if (client !== undefined) {
      await dropPrefix(client, prefix);
      await client.close();
    }
  });

  const listed = async () =>
    (
      await requestJson(client, subjects(prefix).catalogList, {}, CatalogListReplySchema, { timeoutMs: 3000 })
    ).tools.map((t) => t.name);

  it('registers py.reverse and keeps it past its TTL by heartbeating', async () => {
    expect(await listed()).toContain('py.reverse');
    let beats = 0;
    const sub = client.subscribe(subjects(prefix).catalogHeartbeat, () => {
      beats++;
    });
    await until('four heartbeats (more than one TTL)', () => beats >= 4, 10_000);
    sub.unsubscribe();
    expect(await listed()).toContain('py.reverse');
  });

  it('answers a planner run that calls py.reverse', async () => {
    const runId = `py-run-${Date.now()}`;
    await submitRun(
      client,
      {
        id: runId,
        task: 'reverse hello',
        script: [{ tool_calls: [{ name: 'py.reverse', arguments: { text: 'hello' } }] }, { text: 'olleh' }],
      },
      { prefix },
    );
    const end = await waitForRunEnd(client, runId, { prefix });
    expect(end).toMatchObject({ type: 'run.completed', status: 'done' });
    const completed = await waitForRunEvent(client, runId, (e: RunEvent) => e.type === 'tool.completed', {
      prefix,
    });
    expect(completed).toMatchObject({ name: 'py.reverse', is_error: false });
    expect((completed as { preview: string }).preview).toContain('"reversed":"olleh"');
  });

  it('stops a running call when its run is cancelled', async () => {
    const runId = `py-cancel-${Date.now()}`;
    await submitRun(
      client,
      {
        id: runId,
        task: 'reverse slowly',
        script: [
          { tool_calls: [{ name: 'py.reverse', arguments: { text: 'slow', delay_ms: 30_000 } }] },
          { text: 'never' },
        ],
      },
      { prefix },
    );
    await waitForRunEvent(client, runId, (e: RunEvent) => e.type === 'tool.started', { prefix });
    await cancelRun(client, runId, { prefix, reason: 'test' });
    await until('the worker stopped the call', () => workerLog.includes(`"run_id": "${runId}"`), 10_000);
    expect(workerLog).toMatch(new RegExp(`"event": "cancelled".*"run_id": "${runId}"`));
    const end = await waitForRunEnd(client, runId, { prefix });
    expect(end).toMatchObject({ type: 'run.completed', status: 'cancelled' });
  });
});
