/**
 * Issue 7: a fleet on one machine, all real processes: nats-server, a catalog, 2 planners, 3 workers. A plain NATS
 * client with no agentmesh code publishes 50 run requests as raw JSON; all complete with the right answers, tool
 * calls spread across the 3 workers, and neither kill -9 of a worker nor a restart of nats-server during the load
 * loses a run. The figures (runs/s, p50/p99 run time, tool calls per worker) are printed and written to
 * test/.results/fleet-load.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import { startNatsServer, type NatsServerHandle } from './helpers/nats-server.js';
import { REPO_ROOT, cleanEnv, startActor, type ActorProcess } from './helpers/cli.js';

const RUNS = 50;
const enc = new TextEncoder();
const dec = new TextDecoder();

interface RunTrack {
  id: string;
  submittedAt: number;
  finishedAt?: number;
  final?: Record<string, unknown>;
  toolEvents: Record<string, unknown>[];
}

/** Run i multiplies i by 7 and hashes its id: two tool calls in one turn, then the answer. */
function runRequest(i: number, id: string) {
  return {
    id,
    task: `multiply ${i} by 7 and hash "${id}"`,
    provider: 'scripted',
    tools: ['math', 'crypto'],
    script: [
      {
        tool_calls: [
          { name: 'math.calc', arguments: { lhs: i, rhs: 7, op: 'mul' } },
          { name: 'crypto.sha256', arguments: { text: id } },
        ],
      },
      { text: `done ${i}` },
    ],
    limits: { timeout_ms: 120_000 },
  };
}

/** Publishes a RunRequest as raw JSON with a Nats-Msg-Id header, retrying through a server restart. */
async function submit(client: NatsConnection, request: { id: string }): Promise<void> {
  const h = headers();
  h.set('Nats-Msg-Id', request.id);
  for (let attempt = 1; ; attempt++) {
    try {
      const ack = await client.request('agentmesh.runs.submit', enc.encode(JSON.stringify(request)), {
        timeout: 3000,
        headers: h,
      });
      const body = JSON.parse(dec.decode(ack.data)) as { stream?: string; error?: unknown };
      if (body.stream === 'AGENTMESH_RUNS') return;
      throw new Error(`unexpected ack ${JSON.stringify(body)}`);
    } catch (error) {
      if (attempt >= 20) throw error;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/**
 * Events published while this client was reconnecting are in the stream even if the live subscription missed
 * them: read the last event of each unfinished run straight from AGENTMESH_EVENTS (a plain JetStream API request).
 */
async function pollFinals(client: NatsConnection, runs: Map<string, RunTrack>): Promise<void> {
  for (const track of runs.values()) {
    if (track.final) continue;
    try {
      const reply = await client.request(
        '$JS.API.STREAM.MSG.GET.AGENTMESH_EVENTS',
        enc.encode(JSON.stringify({ last_by_subj: `agentmesh.runs.${track.id}.events` })),
        { timeout: 1000 },
      );
      const body = JSON.parse(dec.decode(reply.data)) as { message?: { data: string } };
      if (!body.message) continue;
      const e = JSON.parse(Buffer.from(body.message.data, 'base64').toString('utf8')) as { type: string };
      if (e.type === 'run.completed' || e.type === 'run.failed') {
        track.final = e;
        track.finishedAt = Date.now();
        track.toolEvents = await readToolEvents(client, track.id);
      }
    } catch {
      // the server may be restarting: try again on the next poll
    }
  }
}

async function readToolEvents(client: NatsConnection, runId: string): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  for (let seq = 1; seq < 100_000;) {
    const reply = await client.request(
      '$JS.API.STREAM.MSG.GET.AGENTMESH_EVENTS',
      enc.encode(JSON.stringify({ seq, next_by_subj: `agentmesh.runs.${runId}.events` })),
      { timeout: 1000 },
    );
    const body = JSON.parse(dec.decode(reply.data)) as { message?: { data: string; seq: number } };
    if (!body.message) break;
    const e = JSON.parse(Buffer.from(body.message.data, 'base64').toString('utf8')) as Record<
      string,
      unknown
    >;
    if (String(e['type']).startsWith('tool.')) out.push(e);
    seq = body.message.seq + 1;
  }
  return out;
}

const results: Record<string, unknown> = {};
function recordFigures(phase: string, figures: Record<string, unknown>): void {
  results[phase] = figures;
  mkdirSync(join(REPO_ROOT, 'test', '.results'), { recursive: true });
  writeFileSync(join(REPO_ROOT, 'test', '.results', 'fleet-load.json'), JSON.stringify(results, null, 2));
  console.log(`fleet load figures (${phase})`, figures);
}

describe('fleet under load: 50 raw-JSON runs, 2 planners, 3 workers, a killed worker and a NATS restart', () => {
  let nats: NatsServerHandle;
  let client: NatsConnection;
  const workers: ActorProcess[] = [];
  const others: ActorProcess[] = [];
  const runs = new Map<string, RunTrack>();

  beforeAll(async () => {
    nats = await startNatsServer();
    const env = cleanEnv({ NATS_URL: nats.url });
    others.push(await startActor(['catalog'], env));
    others.push(await startActor(['planner'], env), await startActor(['planner'], env));
    for (let i = 0; i < 3; i++) workers.push(await startActor(['worker', '--concurrency', '32'], env));
    client = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  }, 90_000);

  afterAll(async () => {
    await client?.close();
    await Promise.all([...workers, ...others].map((a) => a.stop()));
    await nats?.dispose();
  });

  it('completes every run with the right answer through a worker kill and a NATS restart', async () => {
    const prefix = `load${Date.now().toString(36)}`;
    // events are read from the JetStream stream by subject, as any client would: a plain subscription here
    const sub = client.subscribe('agentmesh.runs.*.events');
    let resolveDone = () => {};
    const allFinished = () => runs.size === RUNS && [...runs.values()].every((r) => r.final);
    const done = new Promise<void>((resolve) => {
      resolveDone = resolve;
      void (async () => {
        for await (const m of sub) {
          const e = JSON.parse(dec.decode(m.data)) as Record<string, unknown> & {
            type: string;
            run_id: string;
          };
          const track = runs.get(e.run_id);
          if (!track) continue;
          if (e.type.startsWith('tool.')) track.toolEvents.push(e);
          if ((e.type === 'run.completed' || e.type === 'run.failed') && !track.final) {
            track.final = e;
            track.finishedAt = Date.now();
            if (allFinished()) resolve();
          }
        }
      })();
    });
    const started = Date.now();
    for (let i = 0; i < RUNS; i++) {
      const id = `${prefix}-${i}`;
      runs.set(id, { id, submittedAt: Date.now(), toolEvents: [] });
      await submit(client, runRequest(i, id));
      // paced, so the faults land while runs are in flight and every worker has served calls before the kill
      await new Promise((r) => setTimeout(r, 40));
      if (i === 15) process.kill(workers[0]!.child.pid!, 'SIGKILL');
      if (i === 30) await nats.restart(200);
    }
    if (allFinished()) resolveDone();
    const poll = setInterval(
      () => void pollFinals(client, runs).then(() => (allFinished() ? resolveDone() : undefined)),
      1000,
    );
    await Promise.race([
      done,
      new Promise((_, reject) =>
        setTimeout(
          () =>
            reject(
              new Error(
                `runs unfinished: ${[...runs.values()]
                  .filter((r) => !r.final)
                  .map((r) => r.id)
                  .join(', ')}`,
              ),
            ),
          150_000,
        ),
      ),
    ]);
    clearInterval(poll);
    const elapsedS = (Date.now() - started) / 1000;

    const perWorker: Record<string, number> = {};
    for (const [i, track] of [...runs.values()].entries()) {
      expect(track.final, track.id).toMatchObject({ type: 'run.completed' });
      const final = track.final as { status: string; text: string };
      const products = track.toolEvents.filter(
        (e) => e['type'] === 'tool.completed' && e['name'] === 'math.calc',
      );
      // done, or a clear error for a non-idempotent call that may have run (none here: builtins are idempotent)
      expect(final.status, JSON.stringify(track.final)).toBe('done');
      expect(final.text).toBe(`done ${i}`);
      expect(String(products.at(-1)?.['preview'])).toContain(String(i * 7));
      for (const e of track.toolEvents.filter((e) => e['type'] === 'tool.completed'))
        perWorker[String(e['worker_id'])] = (perWorker[String(e['worker_id'])] ?? 0) + 1;
    }
    expect(Object.keys(perWorker).length, JSON.stringify(perWorker)).toBe(3);

    const durations = [...runs.values()].map((r) => r.finishedAt! - r.submittedAt).sort((a, b) => a - b);
    const figures = {
      runs: RUNS,
      runs_per_second: Math.round((RUNS / elapsedS) * 10) / 10,
      run_ms_p50: durations[Math.floor(durations.length * 0.5)],
      run_ms_p99: durations[Math.min(durations.length - 1, Math.floor(durations.length * 0.99))],
      tool_calls_per_worker: perWorker,
      note: 'worker 1 killed with SIGKILL after run 15 was submitted; nats-server restarted after run 30',
    };
    recordFigures('with_faults', figures);
    sub.unsubscribe();
  }, 200_000);

  it('completes a burst of 50 runs on the 2 remaining workers (throughput figures)', async () => {
    const prefix = `burst${Date.now().toString(36)}`;
    const finals = new Map<string, { at: number; event: Record<string, unknown> }>();
    const sub = client.subscribe('agentmesh.runs.*.events', {
      callback: (_e, m) => {
        const e = JSON.parse(dec.decode(m.data)) as Record<string, unknown> & {
          type: string;
          run_id: string;
        };
        if (e.type === 'run.completed' || e.type === 'run.failed')
          finals.set(e.run_id, { at: Date.now(), event: e });
      },
    });
    await client.flush();
    const submitted = new Map<string, number>();
    const started = Date.now();
    await Promise.all(
      Array.from({ length: RUNS }, async (_, i) => {
        const id = `${prefix}-${i}`;
        submitted.set(id, Date.now());
        await submit(client, runRequest(i, id));
      }),
    );
    for (let k = 0; k < 600 && finals.size < RUNS; k++) await new Promise((r) => setTimeout(r, 50));
    const elapsedS = (Date.now() - started) / 1000;
    sub.unsubscribe();
    expect(finals.size).toBe(RUNS);
    for (const [id, f] of finals) {
      expect(f.event, id).toMatchObject({
        type: 'run.completed',
        status: 'done',
        text: `done ${id.split('-').at(-1)}`,
      });
    }
    const durations = [...finals].map(([id, f]) => f.at - submitted.get(id)!).sort((a, b) => a - b);
    recordFigures('burst', {
      runs: RUNS,
      runs_per_second: Math.round((RUNS / elapsedS) * 10) / 10,
      run_ms_p50: durations[Math.floor(durations.length * 0.5)],
      run_ms_p99: durations[Math.min(durations.length - 1, Math.floor(durations.length * 0.99))],
    });
  }, 60_000);
});
