/**
 * Issue 21, part 1: agentmesh on a 3-node NATS cluster with replicated JetStream (AGENTMESH_REPLICAS=3). 200 runs in
 * flight on 2 planners and 3 workers, every actor given NATS_URL=a,b,c (so they spread over the nodes); mid-way the
 * node leading the runs stream is killed with -9 (or, when no actor sits on it, the node holding the most actors),
 * then started again. Every run ends done with the right answer, the non-idempotent `ledger.append` never runs
 * twice, every run's events are gapless, and the actors that sat on the dead node reconnect to the survivors.
 * Figures go to test/.results/cluster-failover.json.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NatsBus, clusteredCasWarning, retry, streamNames, type RunEvent } from '@agentmesh/protocol';
import {
  openRunRecords,
  readRunEvents,
  readRunRecord,
  readTranscript,
  submitRun,
  type RunRecord,
} from '@agentmesh/planner';
import { REPO_ROOT, cleanEnv, startActor, type ActorProcess } from './helpers/cli.js';
import {
  ledgerExecutions,
  startDurableWorker,
  startNatsCluster,
  type ClusterNode,
  type NatsClusterHandle,
} from './helpers/nats-cluster.js';

/** A directory for the nodes' and actors' logs (actors then log at debug), to look into a failed run. */
const KEEP_LOGS = process.env['AGENTMESH_CLUSTER_LOGS'];
const RUNS = 200;
const TURN_DELAY_MS = 1_000;
const LEDGER_MS = 300;
const DOWN_MS = 5_000;

/** Run i: two tool turns (math + ledger, then ledger), then the answer. */
function runRequest(i: number, id: string) {
  const ledger = (tag: string) => ({
    name: 'ledger.append',
    arguments: { entry: `${tag}-${i}`, ms: LEDGER_MS },
  });
  return {
    id,
    task: `run ${i}`,
    provider: 'scripted' as const,
    tools: ['math', 'ledger'],
    script: [
      {
        delay_ms: TURN_DELAY_MS,
        tool_calls: [{ name: 'math.calc', arguments: { lhs: i, rhs: 3, op: 'add' } }, ledger('a')],
      },
      { delay_ms: TURN_DELAY_MS, tool_calls: [ledger('b')] },
      { text: `done ${i}` },
    ],
    limits: { timeout_ms: 150_000 },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function actorConnections(nodes: ClusterNode[]): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const n of nodes.filter((x) => x.running()))
    counts.set(n.name, (await n.clients()).filter((c) => c !== '' && c !== 'cluster-test').length);
  return counts;
}

/**
 * Waits until every run's record says finished, on a watch of the run records bucket (opened once); the records of
 * runs still missing are also read every 5 s, in case the watch missed an update while the cluster moved leaders.
 */
async function finishedRuns(bus: NatsBus, ids: string[], timeoutMs: number): Promise<Set<string>> {
  const wanted = new Set(ids);
  const finished = new Set<string>();
  const kv = await retry(() => openRunRecords(bus), { timeoutMs: 30_000, retryable: () => true });
  let allDone!: () => void;
  const done = new Promise<void>((resolve) => (allDone = resolve));
  const note = (key: string, value: Uint8Array) => {
    if (!wanted.has(key) || (JSON.parse(new TextDecoder().decode(value)) as RunRecord).state !== 'finished')
      return;
    finished.add(key);
    if (finished.size === wanted.size) allDone();
  };
  const watcher = await retry(() => kv.watch((e) => note(e.key, e.value)), {
    timeoutMs: 30_000,
    retryable: () => true,
  });
  const deadline = setTimeout(allDone, timeoutMs);
  const sweep = setInterval(() => {
    void (async () => {
      for (const id of ids.filter((x) => !finished.has(x))) {
        const entry = await kv.get(id).catch(() => null);
        if (entry !== null) note(id, entry.value);
      }
    })();
  }, 5_000);
  try {
    await done;
  } finally {
    clearTimeout(deadline);
    clearInterval(sweep);
    watcher.stop();
  }
  return finished;
}

describe('a 3-node NATS cluster with R3 JetStream: kill -9 of the runs stream leader under 200 runs', () => {
  let cluster: NatsClusterHandle;
  let bus: NatsBus;
  let dir: string;
  let ledgerFile: string;
  const actors: ActorProcess[] = [];
  const workers: ChildProcess[] = [];

  beforeAll(async () => {
    cluster = await startNatsCluster(3);
    dir = mkdtempSync(join(tmpdir(), 'agentmesh-cluster-test-'));
    ledgerFile = join(dir, 'ledger.txt');
    writeFileSync(ledgerFile, '');
    const env = cleanEnv({
      NATS_URL: cluster.urls,
      AGENTMESH_REPLICAS: '3',
      DURABLE_LEDGER: ledgerFile,
      LOG_LEVEL: KEEP_LOGS ? 'debug' : 'warn',
    });
    actors.push(await startActor(['catalog'], env));
    for (let i = 0; i < 2; i++) actors.push(await startActor(['planner'], env));
    workers.push(...(await Promise.all([0, 1, 2].map(() => startDurableWorker(env)))));
    bus = await NatsBus.connect(cluster.urls.split(','), { name: 'cluster-test' });
    await cluster.waitReady([streamNames().runs, streamNames().events]);
  }, 120_000);

  afterAll(async () => {
    if (KEEP_LOGS)
      for (const [i, a] of actors.entries()) writeFileSync(join(KEEP_LOGS, `actor-${i}.log`), a.logs());
    await bus?.close().catch(() => undefined);
    for (const w of workers) if (w.exitCode === null && w.signalCode === null) w.kill('SIGTERM');
    await Promise.all(actors.map((a) => a.stop()));
    await cluster?.dispose();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('each actor warns of a clustered nats-server older than 2.9.21, naming its version, and only then', () => {
    const warning = clusteredCasWarning(bus.nc.info);
    for (const actor of actors)
      if (warning === undefined) expect(actor.logs()).not.toContain('compare-and-set');
      // pino writes the message as a JSON string
      else expect(actor.logs()).toContain(JSON.stringify(warning).slice(1, -1));
  });

  it('every run ends done, no effect twice, gapless events, clients reconnect to the survivors', async () => {
    const names = streamNames();
    const runsInfo = await cluster.streamInfo(names.runs);
    expect(runsInfo.replicas).toBe(3);
    expect((await cluster.streamInfo(names.events)).replicas).toBe(3);
    const assetsBefore = await cluster.streamReplicas();
    expect(
      [...assetsBefore.values()].every((r) => r === 3),
      JSON.stringify([...assetsBefore]),
    ).toBe(true);
    const before = await actorConnections(cluster.nodes);
    const actorCount = actors.length + workers.length;
    expect([...before.values()].reduce((a, b) => a + b, 0)).toBe(actorCount);

    const prefix = `c${Date.now().toString(36)}`;
    const ids = Array.from({ length: RUNS }, (_, i) => `${prefix}-${i}`);
    const started = Date.now();
    await Promise.all(ids.map((id, i) => submitRun(bus, runRequest(i, id))));
    const submittedMs = Date.now() - started;
    await sleep(1_500);

    const leader = (await cluster.streamInfo(names.runs)).leader;
    const busiest = [...before].sort((a, b) => b[1] - a[1])[0]![0];
    const victim = cluster.node(leader !== undefined && (before.get(leader) ?? 0) > 0 ? leader : busiest);
    // nats.js shuffles the server list, so the actors usually spread, but all six on one node (1 in 243) is fine:
    // the node killed is always one that actors are connected to, so they must move.
    expect(before.get(victim.name), 'actors connected to the node killed').toBeGreaterThan(0);
    await victim.kill();
    const killedAt = Date.now() - started;
    const survivors = cluster.nodes.filter((n) => n !== victim);
    let reconnectedMs = -1;
    for (const deadline = Date.now() + 30_000; Date.now() < deadline; await sleep(200)) {
      const now = await actorConnections(survivors);
      if ([...now.values()].reduce((a, b) => a + b, 0) >= actorCount) {
        reconnectedMs = Date.now() - started - killedAt;
        break;
      }
    }
    expect(reconnectedMs, 'every actor reconnected to a surviving node').toBeGreaterThanOrEqual(0);
    await sleep(Math.max(0, DOWN_MS - (Date.now() - started - killedAt)));
    await victim.start();
    const restartedAt = Date.now() - started;

    const finished = await finishedRuns(bus, ids, 150_000);
    const finishedAt = Date.now();
    const finals = new Map<string, RunEvent>();
    for (const id of finished) {
      const last = (await readRunEvents(bus, id)).at(-1);
      if (last?.type === 'run.completed' || last?.type === 'run.failed') finals.set(id, last);
    }
    const elapsedS = (finishedAt - started) / 1000;
    const unfinished = ids.filter((id) => !finals.has(id));
    if (unfinished.length > 0)
      console.error(
        `${unfinished.length} runs unfinished; ${unfinished[0]}:`,
        JSON.stringify(await readRunEvents(bus, unfinished[0]!).catch((e: unknown) => String(e))).slice(
          0,
          3000,
        ),
        'record:',
        JSON.stringify(await readRunRecord(bus, unfinished[0]!).catch((e: unknown) => String(e))),
        actors
          .map((a) =>
            a
              .logs()
              .split('\n')
              .filter((l) => /"level":[45]0/.test(l))
              .slice(-20)
              .join('\n'),
          )
          .join('\n----\n'),
      );
    expect(unfinished).toEqual([]);

    const executions = ledgerExecutions(ledgerFile);
    expect([...executions].filter(([, n]) => n > 1)).toEqual([]);
    let ledgerLost = 0;
    let resumedRuns = 0;
    for (const [i, id] of ids.entries()) {
      expect(finals.get(id), id).toMatchObject({ type: 'run.completed', status: 'done', text: `done ${i}` });
      const events = await readRunEvents(bus, id);
      expect(
        events.map((e) => e.seq),
        id,
      ).toEqual(events.map((_, k) => k + 1));
      expect(events.filter((e) => e.type === 'run.accepted')).toHaveLength(1);
      if (events.some((e) => e.type === 'run.started' && e.resumed === true)) resumedRuns++;
      const tools = (await readTranscript(bus, id))!.messages.filter((m) => m.role === 'tool');
      expect(tools.map((m) => m.name)).toEqual(['math.calc', 'ledger.append', 'ledger.append']);
      expect(tools[0]!.content, id).toContain(String(i + 3));
      for (const m of tools.filter((t) => t.name === 'ledger.append')) {
        if (m.role !== 'tool') continue;
        if (m.is_error) {
          // refused while the outcome store's leader was being elected: it said it did not run, and it did not
          if (/did not run/.test(m.content))
            expect(executions.get(`${id} ${m.call_id}`) ?? 0, `${id} ${m.content}`).toBe(0);
          else expect(m.content, id).toMatch(/worker_lost|may have run/);
          ledgerLost++;
        } else expect(executions.get(`${id} ${m.call_id}`), `${id} ${m.content}`).toBe(1);
      }
    }

    // This test's own client has no replicas setting: it must not have scaled the fleet's R3 assets down.
    const assetsAfter = await cluster.streamReplicas();
    expect(Object.fromEntries(assetsAfter)).toEqual(
      Object.fromEntries([...assetsAfter.keys()].map((k) => [k, 3])),
    );
    await cluster.waitReady([names.runs, names.events], 60_000);
    // The restarted node catches up: the runs and events streams have a leader and three current replicas.
    const caughtUpFrom = Date.now();
    const replicasCurrent = async () =>
      Math.min(
        ...(await Promise.all([names.runs, names.events].map((n) => cluster.streamInfo(n)))).map(
          (i) => i.current,
        ),
      );
    let current = await replicasCurrent();
    for (const until = Date.now() + 60_000; current < 3 && Date.now() < until; await sleep(500))
      current = await replicasCurrent();
    const caughtUpMs = Date.now() - caughtUpFrom;
    expect(current, 'runs and events streams with 3 current replicas').toBe(3);

    const figures = {
      runs: RUNS,
      submit_ms: submittedMs,
      victim: victim.name,
      victim_was_runs_leader: victim.name === leader,
      actors_per_node_before: Object.fromEntries(before),
      killed_at_ms: killedAt,
      all_actors_reconnected_ms: reconnectedMs,
      restarted_at_ms: restartedAt,
      elapsed_s: Math.round(elapsedS * 10) / 10,
      runs_per_second: Math.round((RUNS / elapsedS) * 100) / 100,
      resumed_runs: resumedRuns,
      ledger_calls: executions.size,
      all_replicas_current_after_ms: caughtUpMs,
      ledger_calls_lost_with_node: ledgerLost,
    };
    mkdirSync(join(REPO_ROOT, 'test', '.results'), { recursive: true });
    writeFileSync(
      join(REPO_ROOT, 'test', '.results', 'cluster-failover.json'),
      JSON.stringify(figures, null, 2),
    );
    console.log('cluster failover figures', figures);
  }, 300_000);
});
