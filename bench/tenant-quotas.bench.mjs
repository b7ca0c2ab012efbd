// Tenant quotas and budgets on the run path: submit -> run.accepted and submit -> run.completed (one scripted turn)
// over NATS, one planner without `tenants:` and one with a tenant under runs_per_minute and daily budgets (never
// reached, so every admission and every turn does its KV round trips). Samples alternate between the two planners,
// so load on the machine weighs on both alike.
import { performance } from 'node:perf_hooks';
import { NatsBus, silentLogger, subjects } from '@agentmesh/protocol';
import { Planner, submitRun } from '@agentmesh/planner';
import { miniCatalog } from './embedded-mesh.mjs';
import { figure } from './lib.mjs';

export const title = 'Tenant quotas: the run path with and without per-tenant limits';

const LIMITED = { acme: { runs_per_minute: 1_000_000_000, daily_tokens: 1e12, daily_cost_usd: 1e9 } };

export async function run({ natsUrl, quick }) {
  const plain = await fleet(natsUrl, `btq${process.pid}a`, undefined);
  const limited = await fleet(natsUrl, `btq${process.pid}b`, LIMITED);
  const samples = { plain: [], limited: [] };
  try {
    for (let i = 0; i < 20; i++) await Promise.all([plain.one(), limited.one()]);
    for (let i = 0; i < (quick ? 100 : 400); i++) {
      samples.plain.push(await plain.one());
      samples.limited.push(await limited.one());
    }
  } finally {
    await plain.stop();
    await limited.stop();
  }
  const p50 = (list, key) => list.map((s) => s[key]).sort((a, b) => a - b)[Math.floor(list.length / 2)];
  const acceptedBase = figure('submit -> run.accepted p50, no tenants', p50(samples.plain, 'accepted'), 'us');
  const completedBase = figure(
    'submit -> run.completed (1 turn) p50, no tenants',
    p50(samples.plain, 'completed'),
    'us',
  );
  return [
    acceptedBase,
    figure(
      'submit -> run.accepted p50, runs_per_minute and daily budgets',
      p50(samples.limited, 'accepted'),
      'us',
      acceptedBase,
    ),
    completedBase,
    figure(
      'submit -> run.completed (1 turn) p50, runs_per_minute and daily budgets',
      p50(samples.limited, 'completed'),
      'us',
      completedBase,
    ),
  ];
}

/** A planner (with `tenants` when given) under its own prefix, and a client that times one run at a time. */
async function fleet(natsUrl, prefix, tenants) {
  const bus = await NatsBus.connect(natsUrl);
  const client = await NatsBus.connect(natsUrl);
  const stopCatalog = miniCatalog(bus, [], prefix);
  const planner = new Planner({
    bus,
    prefix,
    logger: silentLogger(),
    transcripts: false,
    ...(tenants ? { tenants } : {}),
  });
  await planner.start();
  const waiters = new Map();
  const sub = client.subscribe(subjects(prefix).allRunEvents, (msg) => {
    const e = JSON.parse(msg.text());
    waiters.get(`${e.run_id}:${e.type}`)?.();
  });
  const heard = (id, type) => new Promise((r) => waiters.set(`${id}:${type}`, r));
  let n = 0;
  return {
    async one() {
      const id = `btq-${++n}`;
      const accepted = heard(id, 'run.accepted');
      const completed = heard(id, 'run.completed');
      const t0 = performance.now();
      const request = { id, task: 'bench', identity: { tenant: 'acme' }, script: [{ text: 'ok' }] };
      await submitRun(client, request, { prefix });
      await accepted;
      const t1 = performance.now();
      await completed;
      waiters.delete(`${id}:run.accepted`);
      waiters.delete(`${id}:run.completed`);
      return { accepted: (t1 - t0) * 1000, completed: (performance.now() - t0) * 1000 };
    },
    async stop() {
      sub.unsubscribe();
      await planner.drain();
      stopCatalog();
      const jsm = await client.jetstreamManager();
      for await (const name of jsm.streams.names())
        if (name.toLowerCase().includes(prefix)) await jsm.streams.delete(name).catch(() => undefined);
      await client.close();
      await bus.close();
    },
  };
}
