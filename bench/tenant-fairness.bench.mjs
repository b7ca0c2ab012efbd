// Fair intake (issue 33): one tenant floods 1,000 runs with max_concurrent_runs 8 while another submits 20; the
// figure is the small tenant's submit -> run.started wait p95 beside the same wait on an idle fleet (2 planners),
// once the flood waits in its tenant queue, and (second figure) submitted right behind the flood's 1,000
// submissions, where the small runs also wait for the dispatch of the flood out of the shared runs.submit FIFO.
// Also submit -> run.accepted with tenants configured beside the same fleet without tenants (one planner each).
import { performance } from 'node:perf_hooks';
import { NatsBus, silentLogger, subjects } from '@agentmesh/protocol';
import { Planner, submitRun } from '@agentmesh/planner';
import { deleteFleetStreams } from './fleet-streams.mjs';
import { figure } from './lib.mjs';
import { miniCatalog } from './embedded-mesh.mjs';

export const title =
  'Tenant fairness: a small tenant beside a flood, and submit -> run.accepted with tenants';

const TENANTS = { flood: { max_concurrent_runs: 8 }, small: { weight: 1 }, default: { weight: 1 } };

async function fleet(natsUrl, prefix, count, tenants) {
  const bus = await NatsBus.connect(natsUrl);
  const stopCatalog = miniCatalog(bus, [], prefix);
  const planners = [];
  const buses = [];
  for (let i = 0; i < count; i++) {
    const own = await NatsBus.connect(natsUrl);
    buses.push(own);
    const planner = new Planner({
      bus: own,
      prefix,
      logger: silentLogger(),
      plannerId: `bench-fair-${prefix}-${i}`,
      transcripts: false,
      ...(tenants ? { tenants } : {}),
    });
    await planner.start();
    planners.push(planner);
  }
  const waiters = new Map();
  const sub = bus.subscribe(subjects(prefix).allRunEvents, (msg) => {
    const e = JSON.parse(msg.text());
    waiters.get(`${e.run_id}/${e.type}`)?.(performance.now());
  });
  const eventOf = (id, type) => new Promise((resolve) => waiters.set(`${id}/${type}`, resolve));
  return {
    bus,
    eventOf,
    async stop() {
      sub.unsubscribe();
      for (const p of planners) await p.drain();
      stopCatalog();
      await deleteFleetStreams(bus, prefix);
      for (const b of buses) await b.close();
      await bus.close();
    },
  };
}

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))];

/** submit -> `type` of one run, in ms. */
async function timed(f, prefix, id, request, type) {
  const seen = f.eventOf(id, type);
  const ended = f.eventOf(id, 'run.completed');
  const t0 = performance.now();
  await submitRun(f.bus, { id, ...request }, { prefix });
  const at = await seen;
  return { ms: at - t0, ended };
}

async function smallTenantWaits(f, prefix, tag) {
  const waits = [];
  const ends = [];
  for (let i = 0; i < 20; i++) {
    const { ms, ended } = await timed(
      f,
      prefix,
      `small-${tag}-${i}`,
      { task: 'small', identity: { tenant: 'small' }, script: [{ text: 'ok' }] },
      'run.started',
    );
    waits.push(ms);
    ends.push(ended);
  }
  await Promise.all(ends);
  return waits.sort((a, b) => a - b);
}

/** Submits `count` runs of the flood tenant; resolves once all are submitted, with their accepted and ended events. */
async function flood(f, prefix, tag, count) {
  const accepted = [];
  const ended = [];
  for (let i = 0; i < count; i += 50) {
    const batch = [];
    for (let j = i; j < Math.min(count, i + 50); j++) {
      const id = `flood-${tag}-${j}`;
      accepted.push(f.eventOf(id, 'run.accepted'));
      ended.push(f.eventOf(id, 'run.completed'));
      const request = {
        id,
        task: 'flood',
        identity: { tenant: 'flood' },
        script: [{ text: 'ok', delay_ms: 20 }],
      };
      batch.push(submitRun(f.bus, request, { prefix }));
    }
    await Promise.all(batch);
  }
  return { accepted: Promise.all(accepted), ended: Promise.all(ended) };
}

async function fairness(natsUrl, quick) {
  const prefix = `bfair${process.pid}`;
  const f = await fleet(natsUrl, prefix, 2, TENANTS);
  const count = quick ? 300 : 1000;
  try {
    await smallTenantWaits(f, prefix, 'warm');
    const idle = await smallTenantWaits(f, prefix, 'idle');
    const queued = await flood(f, prefix, 'queued', count);
    await queued.accepted;
    const busy = await smallTenantWaits(f, prefix, 'busy');
    await queued.ended;
    const behind = await flood(f, prefix, 'behind', count);
    const right = await smallTenantWaits(f, prefix, 'behind');
    await behind.ended;
    return [idle, busy, right];
  } finally {
    await f.stop();
  }
}

async function acceptedP50(natsUrl, quick, tenants) {
  const prefix = `bfairacc${tenants ? 't' : 'n'}${process.pid}`;
  const f = await fleet(natsUrl, prefix, 1, tenants);
  try {
    const samples = [];
    const request = { task: 'bench', script: [{ text: 'ok' }] };
    for (let i = 0; i < 20; i++) await (await timed(f, prefix, `warm-${i}`, request, 'run.accepted')).ended;
    for (let i = 0; i < (quick ? 50 : 200); i++) {
      const { ms, ended } = await timed(f, prefix, `acc-${i}`, request, 'run.accepted');
      samples.push(ms * 1000);
      await ended;
    }
    return quantile(
      samples.sort((a, b) => a - b),
      0.5,
    );
  } finally {
    await f.stop();
  }
}

export async function run({ natsUrl, quick }) {
  const without = await acceptedP50(natsUrl, quick, undefined);
  const withTenants = await acceptedP50(natsUrl, quick, TENANTS);
  const [idle, busy, behind] = await fairness(natsUrl, quick);
  const plain = figure('submit -> run.accepted p50, no tenants configured', without, 'us');
  const idleFigure = figure(
    'tenant fairness: small tenant start wait p95, idle fleet',
    quantile(idle, 0.95),
    'ms',
  );
  return [
    plain,
    figure('submit -> run.accepted p50, tenants configured', withTenants, 'us', plain),
    idleFigure,
    figure('tenant fairness: small tenant start wait p95', quantile(busy, 0.95), 'ms', idleFigure),
    figure('tenant fairness: small tenant start wait p50', quantile(busy, 0.5), 'ms'),
    figure(
      'tenant fairness: small tenant start wait p95, submitted right behind the flood',
      quantile(behind, 0.95),
      'ms',
      idleFigure,
    ),
  ];
}
