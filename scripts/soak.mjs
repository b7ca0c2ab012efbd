#!/usr/bin/env node
// `npm run soak`: a bounded soak of a real fleet (a nats-server, a catalog, 2 planners, 3 workers) at a steady run
// rate with random kill -9 of workers (each replaced at once). Every actor is sampled (RSS, and V8 heap after a full
// GC, by a probe preloaded with NODE_OPTIONS); the nats-server is sampled for subscriptions and JetStream consumers.
// At the end it checks: runs lost 0, every run done, no non-idempotent call executed twice, the heap and RSS of each
// actor that lived through the soak flat within the tolerance (second-quarter median vs last-quarter median), and
// the consumer and subscription counts flat. Exit 0 when every check holds, 1 otherwise.
// Flags: --duration S (default 600), --rate R runs/s (default 17: 10,000 runs in 10 min), --kill-every S (default
// 30), --tolerance F (default 0.10), --json (the report as one JSON object on stdout), --out FILE (also write it).
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { NatsBus, streamNames, subjects } from '@agentmesh/protocol';
import { readRunEvents, submitRun } from '@agentmesh/planner';
import { sleep, spawnActor as spawnProcess, startNats } from './soak/procs.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const CLI = join(ROOT, 'packages', 'cli', 'bin', 'agentmesh.js');
const WORKER = join(ROOT, 'test', 'fixtures', 'durable-worker.mjs');

function flag(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}
const durationS = flag('duration', 600);
const rate = flag('rate', 17);
const killEveryS = flag('kill-every', 30);
const tolerance = flag('tolerance', 0.1);
const json = process.argv.includes('--json');
const outIdx = process.argv.indexOf('--out');
const outFile = outIdx >= 0 ? process.argv[outIdx + 1] : undefined;
const SAMPLE_MS = Math.max(1000, Math.min(10_000, Math.round((durationS * 1000) / 40)));

const log = (...a) => (json ? console.error(...a) : console.log(...a));

/** The preload every actor gets: a full GC, then one JSON line of memory figures, every SAMPLE_MS. */
const PROBE = `
const { appendFileSync } = await import('node:fs');
const { isMainThread } = await import('node:worker_threads');
const file = process.env.SOAK_PROBE_DIR + '/' + process.pid + '.jsonl';
if (isMainThread && process.env.SOAK_PROBE_DIR) {
  const t = setInterval(() => {
    globalThis.gc?.();
    const m = process.memoryUsage();
    appendFileSync(file, JSON.stringify({ t: Date.now(), rss: m.rss, heap: m.heapUsed }) + '\\n');
  }, Number(process.env.SOAK_PROBE_MS));
  t.unref();
}
`;

function spawnActor(kind, args, env) {
  return spawnProcess(kind, args, env, { cwd: ROOT });
}

function runRequest(i, id) {
  return {
    id,
    task: `soak ${i}`,
    provider: 'scripted',
    tools: ['math', 'ledger'],
    script: [
      {
        tool_calls: [
          { name: 'math.calc', arguments: { lhs: i, rhs: 2, op: 'mul' } },
          { name: 'ledger.append', arguments: { entry: `s-${i}` } },
        ],
      },
      { text: `done ${i}` },
    ],
    limits: { timeout_ms: 120_000 },
  };
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : s[Math.floor(s.length / 2)];
}

/** Growth of the last-quarter median over the second-quarter median (the first quarter is warm-up). */
function growth(samples, key, t0, t1) {
  const span = t1 - t0;
  const at = (a, b) => samples.filter((s) => s.t >= t0 + span * a && s.t <= t0 + span * b).map((s) => s[key]);
  const early = median(at(0.25, 0.5));
  const late = median(at(0.75, 1));
  return { early, late, growth: early > 0 ? late / early - 1 : 0 };
}

async function serverCounts(monitor, bus) {
  const varz = await (await fetch(`${monitor}/varz`)).json();
  const jsm = await bus.jetstreamManager();
  const names = streamNames();
  const consumers = {};
  for (const s of [names.runs, names.events]) consumers[s] = (await jsm.streams.info(s)).state.consumer_count;
  return { t: Date.now(), subscriptions: varz.subscriptions, connections: varz.connections, consumers };
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'agentmesh-soak-'));
  const probeDir = join(dir, 'probe');
  mkdirSync(probeDir);
  const probeFile = join(dir, 'probe.mjs');
  writeFileSync(probeFile, PROBE);
  const ledger = join(dir, 'ledger.txt');
  writeFileSync(ledger, '');
  const nats = await startNats(dir);
  const env = {
    ...process.env,
    NATS_URL: nats.url,
    DURABLE_LEDGER: ledger,
    LOG_LEVEL: 'info',
    SOAK_PROBE_DIR: probeDir,
    SOAK_PROBE_MS: String(SAMPLE_MS),
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --expose-gc --import=${pathToFileURL(probeFile).href}`,
  };
  for (const k of ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'AGENTMESH_CONFIG']) delete env[k];
  const actors = [];
  const stopAll = async () => {
    for (const a of actors)
      if (a.child.exitCode === null && a.child.signalCode === null) a.child.kill('SIGKILL');
    if (nats.child.exitCode !== null) return;
    const exited = new Promise((resolve) => nats.child.once('exit', resolve));
    nats.child.kill('SIGTERM');
    await exited;
  };
  process.once('SIGINT', () => void stopAll().then(() => process.exit(130)));
  try {
    actors.push(await spawnActor('catalog', [CLI, 'catalog'], env));
    for (let i = 0; i < 2; i++) actors.push(await spawnActor('planner', [CLI, 'planner'], env));
    for (let i = 0; i < 3; i++) actors.push(await spawnActor('worker', [WORKER], env));
    const bus = await NatsBus.connect(nats.url, { name: 'soak' });

    const finals = new Map();
    const sub = bus.subscribe(subjects().allRunEvents, (msg) => {
      const e = JSON.parse(new TextDecoder().decode(msg.data));
      if (e.type === 'run.completed' || e.type === 'run.failed') finals.set(e.run_id, e);
    });
    const prefix = `soak${Date.now().toString(36)}`;
    const ids = [];
    const server = [];
    const kills = [];
    const t0 = Date.now();
    const end = t0 + durationS * 1000;
    let nextSample = t0;
    let nextKill = t0 + killEveryS * 1000;
    log(
      `soak: ${durationS} s at ${rate} runs/s (${Math.round(durationS * rate)} runs), a worker killed every ${killEveryS} s`,
    );
    while (Date.now() < end) {
      const due = Math.min(Math.round(((Date.now() - t0) / 1000) * rate), Math.round(durationS * rate));
      const batch = [];
      while (ids.length < due) {
        const id = `${prefix}-${ids.length}`;
        batch.push(submitRun(bus, runRequest(ids.length, id)));
        ids.push(id);
      }
      await Promise.all(batch);
      if (Date.now() >= nextSample) {
        server.push(await serverCounts(nats.monitor, bus));
        nextSample += SAMPLE_MS;
        log(`  ${Math.round((Date.now() - t0) / 1000)} s: ${ids.length} submitted, ${finals.size} finished`);
      }
      if (Date.now() >= nextKill) {
        const live = actors.filter(
          (a) => a.kind === 'worker' && a.child.exitCode === null && a.child.signalCode === null,
        );
        const victim = live[Math.floor(Math.random() * live.length)];
        victim.child.kill('SIGKILL');
        victim.killedAt = Date.now();
        kills.push({ at_ms: Date.now() - t0, pid: victim.child.pid });
        actors.push(await spawnActor('worker', [WORKER], env));
        nextKill += killEveryS * 1000;
      }
      await sleep(50);
    }
    const submittedAt = Date.now();
    for (const until = Date.now() + 120_000; finals.size < ids.length && Date.now() < until;)
      await sleep(500);
    for (const id of ids.filter((x) => !finals.has(x))) {
      const last = (await readRunEvents(bus, id).catch(() => [])).at(-1);
      if (last?.type === 'run.completed' || last?.type === 'run.failed') finals.set(id, last);
    }
    server.push(await serverCounts(nats.monitor, bus));
    sub.unsubscribe();

    const executions = new Map();
    for (const line of readFileSync(ledger, 'utf8').split('\n')) {
      const [run, call] = line.split(' ');
      if (run && call) executions.set(`${run} ${call}`, (executions.get(`${run} ${call}`) ?? 0) + 1);
    }
    const lost = ids.filter((id) => !finals.has(id));
    const notDone = ids.filter((id) => finals.has(id) && finals.get(id).status !== 'done');
    const twice = [...executions].filter(([, n]) => n > 1).map(([k]) => k);

    const memory = [];
    for (const a of actors) {
      const file = join(probeDir, `${a.child.pid}.jsonl`);
      const samples = readdirSync(probeDir).includes(`${a.child.pid}.jsonl`)
        ? readFileSync(file, 'utf8')
            .trim()
            .split('\n')
            .filter(Boolean)
            .map((l) => JSON.parse(l))
        : [];
      const whole = a.killedAt === undefined && a.started - t0 < SAMPLE_MS;
      const entry = { kind: a.kind, pid: a.child.pid, whole_soak: whole, samples: samples.length };
      if (whole) {
        entry.heap = growth(samples, 'heap', t0, submittedAt);
        entry.rss = growth(samples, 'rss', t0, submittedAt);
      }
      entry.series = samples.map((s) => ({
        s: Math.round((s.t - t0) / 1000),
        rss_mb: +(s.rss / 2 ** 20).toFixed(1),
        heap_mb: +(s.heap / 2 ** 20).toFixed(1),
      }));
      memory.push(entry);
    }
    const half = (key) => {
      const mid = t0 + (submittedAt - t0) / 2;
      const pick = (s) =>
        key === 'subscriptions' ? s.subscriptions : Object.values(s.consumers).reduce((x, y) => x + y, 0);
      const first = server.filter((s) => s.t > t0 + SAMPLE_MS && s.t <= mid).map(pick);
      const second = server.filter((s) => s.t > mid).map(pick);
      return { first_half_max: Math.max(...first), second_half_max: Math.max(...second) };
    };
    const subs = half('subscriptions');
    const consumers = half('consumers');
    const flat = memory
      .filter((m) => m.whole_soak)
      .flatMap((m) => [
        { what: `${m.kind} ${m.pid} heap`, ...m.heap },
        { what: `${m.kind} ${m.pid} rss`, ...m.rss },
      ]);
    const checks = {
      runs_lost: lost.length === 0,
      all_done: notDone.length === 0,
      no_call_twice: twice.length === 0,
      memory_flat: flat.every((f) => f.growth <= tolerance),
      subscriptions_flat: subs.second_half_max <= subs.first_half_max * (1 + tolerance),
      consumers_flat: consumers.second_half_max <= consumers.first_half_max,
    };
    const report = {
      duration_s: durationS,
      rate,
      runs: ids.length,
      runs_lost: lost.length,
      runs_not_done: notDone.length,
      lost_sample: lost.slice(0, 5),
      calls_twice: twice.length,
      worker_kills: kills,
      drain_s: Math.round((Date.now() - submittedAt) / 100) / 10,
      tolerance,
      growth: flat.map((f) => ({
        what: f.what,
        early_mb: +(f.early / 2 ** 20).toFixed(2),
        late_mb: +(f.late / 2 ** 20).toFixed(2),
        growth: +f.growth.toFixed(3),
      })),
      subscriptions: subs,
      consumers,
      server_samples: server.map((s) => ({
        s: Math.round((s.t - t0) / 1000),
        subscriptions: s.subscriptions,
        connections: s.connections,
        consumers: s.consumers,
      })),
      memory,
      checks,
      ok: Object.values(checks).every(Boolean),
    };
    await bus.close();
    if (outFile) writeFileSync(outFile, JSON.stringify(report, null, 2));
    if (json) console.log(JSON.stringify(report));
    else {
      console.log(
        `runs ${report.runs}, lost ${report.runs_lost}, not done ${report.runs_not_done}, calls twice ${report.calls_twice}, worker kills ${kills.length}`,
      );
      for (const g of report.growth)
        console.log(`  ${g.what}: ${g.early_mb} MB -> ${g.late_mb} MB (${(g.growth * 100).toFixed(1)}%)`);
      console.log(
        `  subscriptions max ${subs.first_half_max} -> ${subs.second_half_max}; consumers max ${consumers.first_half_max} -> ${consumers.second_half_max}`,
      );
      console.log(
        Object.entries(checks)
          .map(([k, v]) => `${v ? 'ok  ' : 'FAIL'} ${k}`)
          .join('\n'),
      );
    }
    process.exitCode = report.ok ? 0 : 1;
  } finally {
    await stopAll();
    rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
  }
}

if (process.argv.includes('--chaos')) {
  const { chaosSoak } = await import('./soak/chaos.mjs');
  await chaosSoak();
} else await main();
