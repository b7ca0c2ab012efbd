// `npm run soak -- --chaos [--duration S] [--rate R] [--chaos-every S] [--json] [--out FILE]`: a fleet (a catalog, 2
// planners, 2 workers) on a 3-node NATS cluster with JetStream R3 (AGENTMESH_REPLICAS=3). Every few seconds one
// random actor is killed (-9) and started again, and sometimes one NATS node, while runs with approvals, inputs,
// sub-agents and two tool turns flow and daemons are woken by triggers. The driver decides approvals and sends inputs
// and triggers with the retry-safe control requests (the same request id on every attempt). At the end it reports
// runs submitted, finished, lost and duplicated, effects repeated or missing, wrong answers, inputs and triggers
// applied other than once, p99 run latency and actor RSS. Exit 0 when nothing was lost, duplicated or repeated.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NatsBus, newRequestId } from '@agentmesh/protocol';
import {
  readRunEvents,
  sendApprovalDecision,
  sendRunControl,
  submitRun,
  triggerRun,
} from '@agentmesh/planner';
import { sleep, spawnActor, startNatsCluster } from './procs.mjs';
import { chaosDaemon, chaosRun, ledgerEntries, percentile } from './workload.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const CLI = join(ROOT, 'packages', 'cli', 'bin', 'agentmesh.js');
const WORKER = join(ROOT, 'test', 'fixtures', 'durable-worker.mjs');
const DAEMONS = 2;
const isFinal = (e) => e.type === 'run.completed' || e.type === 'run.failed';

function options() {
  const flag = (name, fallback) => {
    const i = process.argv.indexOf(`--${name}`);
    return i >= 0 ? Number(process.argv[i + 1]) : fallback;
  };
  const out = process.argv.indexOf('--out');
  return {
    durationS: flag('duration', 600),
    rate: flag('rate', 2),
    everyS: flag('chaos-every', 5),
    json: process.argv.includes('--json'),
    outFile: out >= 0 ? process.argv[out + 1] : undefined,
  };
}

/** The fleet's actor processes, each restartable after a kill -9. */
function fleet(env) {
  const specs = [
    { kind: 'catalog', args: [CLI, 'catalog'] },
    { kind: 'planner', args: [CLI, 'planner'] },
    { kind: 'planner', args: [CLI, 'planner'] },
    { kind: 'worker', args: [WORKER] },
    { kind: 'worker', args: [WORKER] },
  ];
  const live = specs.map(() => undefined);
  const rss = new Map();
  return {
    async start(slot) {
      const { kind, args } = specs[slot];
      live[slot] = await spawnActor(kind, args, env, { cwd: ROOT });
    },
    async startAll() {
      await Promise.all(specs.map((_, slot) => this.start(slot)));
    },
    slots: () => specs.map((s, slot) => ({ ...s, slot })),
    async kill(slot) {
      const actor = live[slot];
      if (actor === undefined || actor.child.exitCode !== null || actor.child.signalCode !== null) return;
      await new Promise((resolve) => {
        actor.child.once('exit', resolve);
        actor.child.kill('SIGKILL');
      });
    },
    sampleRss() {
      for (const [slot, actor] of live.entries()) {
        if (actor === undefined || actor.child.exitCode !== null) continue;
        let status;
        try {
          status = readFileSync(`/proc/${actor.child.pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/);
        } catch {
          continue; // killed meanwhile
        }
        if (!status) continue;
        const mb = Number(status[1]) / 1024;
        const kind = specs[slot].kind;
        const seen = rss.get(kind) ?? { max_mb: 0, last_mb: 0 };
        rss.set(kind, { max_mb: Math.max(seen.max_mb, mb), last_mb: mb });
      }
    },
    rss: () =>
      Object.fromEntries(
        [...rss].map(([k, v]) => [k, { max_mb: +v.max_mb.toFixed(1), last_mb: +v.last_mb.toFixed(1) }]),
      ),
    async stopAll() {
      await Promise.all(specs.map((_, slot) => this.kill(slot)));
    },
  };
}

/** One chaos event: kill -9 a random actor (or, one time in four, a NATS node) and start it again. */
async function chaosEvent(actors, cluster, kills) {
  const t = Date.now();
  if (Math.random() < 0.25) {
    const node = cluster.nodes[Math.floor(Math.random() * cluster.nodes.length)];
    await node.kill();
    await sleep(1_000);
    await node.start();
    kills.push({ what: `nats ${node.name}`, restart_ms: Date.now() - t });
    return;
  }
  const slots = actors.slots();
  const victim = slots[Math.floor(Math.random() * slots.length)];
  await actors.kill(victim.slot);
  await actors.start(victim.slot);
  kills.push({ what: victim.kind, restart_ms: Date.now() - t });
}

/** A run's stored events, or undefined when they cannot be read within 5 s (a NATS node is down). */
function readEvents(bus, prefix, runId) {
  return readRunEvents(bus, runId, { prefix, signal: AbortSignal.timeout(5_000) }).catch(() => undefined);
}

/** The stored events of every run, read again at the end (an event appended after the sweep saw the run end counts). */
async function readAll(bus, prefix, runs) {
  const list = [...runs.values()];
  for (let k = 0; k < list.length; k += 20)
    await Promise.all(
      list.slice(k, k + 20).map(async (run) => {
        for (let attempt = 0; attempt < 5; attempt++) {
          const events = await readEvents(bus, prefix, run.request.id);
          if (events !== undefined) return void (run.events = events);
        }
      }),
    );
}

/** Retries a control request (same request id every time) until it is answered or `deadline` passes. */
async function retried(send, deadline) {
  for (;;) {
    try {
      return await send();
    } catch (error) {
      if (error?.code === 'already_decided' || Date.now() > deadline) throw error;
      await sleep(500);
    }
  }
}

/**
 * The driver's book of runs: what each must leave, when it was submitted and ended, the stored events, and the
 * approvals, inputs and triggers sent. `sweep` reads the stored events of runs not yet ended (a subscription misses
 * what is published while its NATS node is down) and decides their approvals.
 */
function book(bus, prefix) {
  const runs = new Map();
  const decided = new Set();
  const sweep = async (deadlineMs) => {
    const open = [...runs.values()].filter((r) => r.endedAt === undefined);
    await Promise.all(
      open.map(async (run) => {
        const events = await readEvents(bus, prefix, run.request.id);
        if (events === undefined) return;
        run.events = events;
        const final = events.find(isFinal);
        if (final) run.endedAt = Date.parse(final.ts);
        for (const e of events.filter(
          (x) => x.type === 'approval.requested' && !decided.has(x.approval_id),
        )) {
          decided.add(e.approval_id);
          const decision = run.refused?.length ? 'deny' : 'approve';
          const body = { approval_id: e.approval_id, decision, by: 'chaos', request_id: newRequestId() };
          run.decision = retried(
            () => sendApprovalDecision(bus, run.request.id, body, { prefix, timeoutMs: 5_000 }),
            Date.now() + deadlineMs,
          ).catch((error) => (run.decisionError = String(error)));
        }
      }),
    );
  };
  return { runs, sweep };
}

/** Submits run i; a run given an input gets it first (kept until its first turn applies it, exactly once). */
async function submitWork(bus, prefix, runs, i) {
  const run = { ...chaosRun(prefix, i), submittedAt: Date.now() };
  runs.set(run.request.id, run);
  if (run.input !== undefined) {
    const input = { kind: 'input', text: run.input };
    const options = { prefix, requestId: newRequestId(), timeoutMs: 5_000 };
    await retried(() => sendRunControl(bus, run.request.id, input, options), Date.now() + 60_000).catch(
      (error) => (run.inputError = String(error)),
    );
  }
  await retried(() => submitRun(bus, run.request, { prefix }), Date.now() + 60_000);
}

async function trigger(bus, prefix, daemon) {
  const n = daemon.next++;
  const request_id = newRequestId();
  await retried(
    () => triggerRun(bus, daemon.id, { kind: 'chaos', n, request_id }, { prefix, timeoutMs: 5_000 }),
    Date.now() + 30_000,
  )
    .then(() => daemon.sent.push(n))
    .catch((error) => daemon.errors.push(String(error)));
}

/** A daemon's triggers: sent (answered ok), never seen in a `daemon.woken`, seen twice; whether it still lives. */
function daemonSummary(d) {
  const woken = d.events.filter((e) => e.type === 'daemon.woken' && e.reason === 'trigger');
  const seen = woken.map((e) => e.trigger?.n);
  return {
    sent: d.sent.length,
    lost: d.sent.filter((n) => !seen.includes(n)).length,
    // the triggers not seen in a `daemon.woken` that come before the last one seen: not a backlog still queued
    lost_before_last_woken: d.sent.filter((n) => !seen.includes(n) && n < Math.max(-1, ...seen)).slice(0, 8),
    twice: seen.length - new Set(seen).size,
    twice_sample: woken
      .filter((e) => seen.filter((n) => n === e.trigger?.n).length > 1)
      .slice(0, 4)
      .map((e) => ({ seq: e.seq, n: e.trigger?.n })),
    alive: !d.events.some(isFinal),
    final: d.events.find(isFinal),
    errors: d.errors.slice(0, 3),
  };
}

/** Counts what went wrong: runs lost or ended twice, effects repeated or missing, answers and controls not once. */
function tally(runs, ledgerText, daemons) {
  const effects = ledgerEntries(ledgerText);
  const all = [...runs.values()];
  const finals = (r) => (r.events ?? []).filter(isFinal);
  const count = (f) => all.filter(f).length;
  const expected = new Set(all.flatMap((r) => r.effects));
  const latencies = all.filter((r) => r.endedAt !== undefined).map((r) => r.endedAt - r.submittedAt);
  const wokenBy = daemons.map(daemonSummary);
  return {
    runs_submitted: all.length,
    runs_finished: count((r) => finals(r).length > 0),
    runs_lost: count((r) => finals(r).length === 0),
    runs_duplicated: count((r) => finals(r).length > 1),
    runs_wrong: count(
      (r) => finals(r).length === 1 && (finals(r)[0].status !== 'done' || finals(r)[0].text !== r.text),
    ),
    effects_repeated: [...effects.values()].filter((n) => n > 1).length,
    effects_missing: [...expected].filter((e) => !effects.has(e)).length,
    effects_refused_but_made: all.flatMap((r) => r.refused ?? []).filter((e) => effects.has(e)).length,
    decisions_failed: count((r) => r.decisionError !== undefined),
    inputs_not_once: count(
      (r) => r.input !== undefined && (r.events ?? []).filter((e) => e.type === 'run.input').length !== 1,
    ),
    latency_ms: {
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      max: percentile(latencies, 100),
    },
    daemons: wokenBy,
    samples: {
      lost: all
        .filter((r) => finals(r).length === 0)
        .slice(0, 5)
        .map((r) => r.request.id),
      wrong: all
        .filter((r) => finals(r).length === 1 && finals(r)[0].text !== r.text)
        .slice(0, 5)
        .map((r) => ({ id: r.request.id, final: finals(r)[0] })),
      repeated: [...effects].filter(([, n]) => n > 1).slice(0, 5),
      missing: [...expected].filter((x) => !effects.has(x)).slice(0, 5),
    },
  };
}

export async function chaosSoak() {
  const opts = options();
  const log = (...a) => (opts.json ? console.error(...a) : console.log(...a));
  const dir = mkdtempSync(join(tmpdir(), 'agentmesh-chaos-'));
  mkdirSync(join(dir, 'nats'));
  const ledger = join(dir, 'ledger.txt');
  writeFileSync(ledger, '');
  const config = join(dir, 'agentmesh.yaml');
  writeFileSync(config, 'limits:\n  max_iterations: 5000\n');
  const cluster = await startNatsCluster(join(dir, 'nats'), 3);
  const prefix = `chaos${Date.now().toString(36)}`;
  const env = {
    ...process.env,
    NATS_URL: cluster.urls.join(','),
    AGENTMESH_REPLICAS: '3',
    AGENTMESH_PREFIX: prefix,
  };
  Object.assign(env, {
    AGENTMESH_CONFIG: config,
    DURABLE_LEDGER: ledger,
    AGENTMESH_REDELIVER_MS: '2000',
    LOG_LEVEL: 'info',
  });
  for (const k of ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'OPENAI_BASE_URL']) delete env[k];
  const actors = fleet(env);
  let bus;
  try {
    log(`starting a catalog, 2 planners and 2 workers on ${cluster.urls.join(',')}`);
    await actors.startAll();
    bus = await NatsBus.connect(cluster.urls, { name: 'chaos-soak', replicas: 3 });
    const report = await drive(bus, prefix, actors, cluster, opts, log);
    report.effects = tally(report.runsBook, readFileSync(ledger, 'utf8'), report.daemonBook);
    delete report.runsBook;
    delete report.daemonBook;
    finish(report, opts, log);
  } finally {
    await bus?.close().catch(() => undefined);
    await actors.stopAll();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
  }
}

/** The daemons, each answering a wake every 2 s of the soak. */
async function startDaemons(bus, prefix, durationS) {
  const wakes = Math.ceil(durationS / 2) + 10;
  const daemons = [];
  for (let d = 0; d < DAEMONS; d++) {
    const request = chaosDaemon(prefix, d, wakes);
    await retried(() => submitRun(bus, request, { prefix }), Date.now() + 60_000);
    daemons.push({ id: request.id, next: 0, sent: [], errors: [], events: [] });
  }
  return daemons;
}

/** Waits (3 min at most) for every run to end and every decision to land; then reads every run's events again. */
async function awaitEnds(bus, prefix, runs, daemons, sweep) {
  const started = Date.now();
  while (Date.now() < started + 180_000 && [...runs.values()].some((r) => r.endedAt === undefined)) {
    await sweep(60_000);
    await sleep(1_000);
  }
  await Promise.all([...runs.values()].map((r) => r.decision));
  await readAll(bus, prefix, runs);
  for (const d of daemons) d.events = (await readEvents(bus, prefix, d.id)) ?? [];
}

async function drive(bus, prefix, actors, cluster, opts, log) {
  const { runs, sweep } = book(bus, prefix);
  const daemons = await startDaemons(bus, prefix, opts.durationS);
  const kills = [];
  const t0 = Date.now();
  const end = t0 + opts.durationS * 1000;
  let nextChaos = t0 + opts.everyS * 1000;
  let chaosBusy = false;
  let nextTrigger = t0 + 2_000;
  let nextSweep = t0;
  let i = 0;
  log(
    `chaos soak: ${opts.durationS} s at ${opts.rate} runs/s, a kill -9 every ${opts.everyS} s, 3-node R3 cluster`,
  );
  const pending = new Map();
  const track = (label, promise) => {
    pending.set(label, Date.now());
    return promise.finally(() => pending.delete(label));
  };
  const inFlight = [];
  while (Date.now() < end) {
    const due = Math.round(((Date.now() - t0) / 1000) * opts.rate);
    while (i < due) inFlight.push(track(`submit ${i}`, submitWork(bus, prefix, runs, i++)));
    if (Date.now() >= nextChaos && !chaosBusy) {
      // one fault at a time: an R3 cluster keeps its quorum with one node down, not two
      chaosBusy = true;
      inFlight.push(
        track(`chaos ${kills.length}`, chaosEvent(actors, cluster, kills)).finally(() => (chaosBusy = false)),
      );
      nextChaos = Date.now() + opts.everyS * 1000;
    }
    if (Date.now() >= nextTrigger) {
      for (const d of daemons) inFlight.push(track(`trigger ${d.id} ${d.next}`, trigger(bus, prefix, d)));
      nextTrigger += 2_000;
    }
    if (Date.now() >= nextSweep) {
      actors.sampleRss();
      await sweep(60_000);
      nextSweep = Date.now() + 1_000;
      log(
        `  ${Math.round((Date.now() - t0) / 1000)} s: ${runs.size} submitted, ${[...runs.values()].filter((r) => r.endedAt).length} ended, ${kills.length} kills`,
      );
    }
    await sleep(50);
  }
  const waiting = setInterval(
    () => log(`  waiting for ${[...pending.keys()].slice(0, 5).join(', ')}`),
    5_000,
  );
  await Promise.all(inFlight).finally(() => clearInterval(waiting));
  log('  submitted; waiting for every run to end');
  const submittedAt = Date.now();
  await awaitEnds(bus, prefix, runs, daemons, sweep);
  actors.sampleRss();
  return {
    duration_s: opts.durationS,
    rate: opts.rate,
    chaos_every_s: opts.everyS,
    kills: kills.length,
    kills_by_kind: kills.reduce(
      (acc, k) => ({ ...acc, [k.what.split(' ')[0]]: (acc[k.what.split(' ')[0]] ?? 0) + 1 }),
      {},
    ),
    drain_s: Math.round((Date.now() - submittedAt) / 100) / 10,
    rss_mb: actors.rss(),
    runsBook: runs,
    daemonBook: daemons,
  };
}

/**
 * The targets (exit 1 when one is missed): no run lost, none ended twice, no tool effect made twice, no denied
 * effect made. Also reported, as "watch": runs that ended other than `done` with their answer (a fault they did not
 * ride out), effects missing with them, decisions, inputs and triggers not applied exactly once.
 */
function finish(report, opts, log) {
  const e = report.effects;
  const checks = {
    none_lost: e.runs_lost === 0,
    none_duplicated: e.runs_duplicated === 0,
    no_effect_repeated: e.effects_repeated === 0 && e.effects_refused_but_made === 0,
  };
  const watch = {
    right_answers: e.runs_wrong === 0,
    no_effect_missing: e.effects_missing === 0,
    decisions_landed: e.decisions_failed === 0,
    inputs_once: e.inputs_not_once === 0,
    triggers_once: e.daemons.every((d) => d.lost === 0 && d.twice === 0 && d.alive),
  };
  Object.assign(report, { checks, watch, ok: Object.values(checks).every(Boolean) });
  if (opts.outFile) writeFileSync(opts.outFile, JSON.stringify(report, null, 2));
  if (opts.json) console.log(JSON.stringify(report));
  else {
    log(
      `runs ${e.runs_submitted} submitted, ${e.runs_finished} finished, ${e.runs_lost} lost, ${e.runs_duplicated} duplicated, ${e.runs_wrong} wrong; effects repeated ${e.effects_repeated}, missing ${e.effects_missing}`,
    );
    log(
      `latency p50 ${e.latency_ms.p50} ms, p99 ${e.latency_ms.p99} ms; kills ${JSON.stringify(report.kills_by_kind)}; RSS ${JSON.stringify(report.rss_mb)}`,
    );
    log(
      [
        ...Object.entries(checks).map(([k, v]) => `${v ? 'ok  ' : 'FAIL'} ${k}`),
        ...Object.entries(watch).map(([k, v]) => `${v ? 'ok  ' : 'WARN'} ${k} (watched)`),
      ].join('\n'),
    );
  }
  process.exitCode = report.ok ? 0 : 1;
}
