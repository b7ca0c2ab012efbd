// Planner failover: a run's planner process is killed -9 in the middle of a model call; the figure is the time from
// the kill to the run continuing on another planner (its `run.started` with `resumed: true`), with the default lease.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { NatsBus, silentLogger } from '@agentmesh/protocol';
import { DEFAULT_LEASE_MS, Planner, submitRun } from '@agentmesh/planner';
import { deleteFleetStreams } from './fleet-streams.mjs';
import { figure } from './lib.mjs';
import { miniCatalog } from './embedded-mesh.mjs';

export const title =
  'Planner failover: kill -9 of the planner of a run to the run continuing on another planner';

const here = dirname(fileURLToPath(import.meta.url));
const MODEL_MS = 1_500;

function startChildPlanner(natsUrl, prefix, id) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(here, 'failover-planner.mjs'), natsUrl, prefix, id], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d.toString();
      if (out.includes('"ready":true')) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`failover planner exited with ${code}`)));
  });
}

/** Resolves with the first event of `runId` that `match` accepts, and the time it arrived. */
function eventOf(bus, prefix, runId, match) {
  return new Promise((resolve) => {
    const sub = bus.subscribe(`${prefix}.runs.${runId}.events`, (msg) => {
      const e = JSON.parse(msg.text());
      if (!match(e)) return;
      sub.unsubscribe();
      resolve({ event: e, at: performance.now() });
    });
  });
}

async function oneFailover(bus, natsUrl, prefix, i) {
  const runId = `failover-${process.pid}-${i}`;
  const child = await startChildPlanner(natsUrl, prefix, `bench-doomed-${i}`);
  const asked = eventOf(bus, prefix, runId, (e) => e.type === 'llm.request');
  const resumed = eventOf(bus, prefix, runId, (e) => e.type === 'run.started' && e.resumed === true);
  const done = eventOf(bus, prefix, runId, (e) => e.type === 'run.completed' || e.type === 'run.failed');
  await submitRun(
    bus,
    { id: runId, task: 'failover', tool_search: 'off', script: [{ text: 'ok', delay_ms: MODEL_MS }] },
    { prefix },
  );
  await asked;
  const survivorBus = await NatsBus.connect(natsUrl);
  const survivor = new Planner({
    bus: survivorBus,
    prefix,
    plannerId: `bench-survivor-${i}`,
    logger: silentLogger(),
    transcripts: false,
    durability: { redeliverMs: 1_000 },
  });
  await survivor.start();
  const killedAt = performance.now();
  child.kill('SIGKILL');
  const { at } = await resumed;
  const { event } = await done;
  if (event.type !== 'run.completed' || event.status !== 'done')
    throw new Error(`failover run ended ${JSON.stringify(event)}`);
  await survivor.drain();
  await survivorBus.close();
  return at - killedAt;
}

export async function run({ natsUrl, quick }) {
  const prefix = `bfailover${process.pid}`;
  const bus = await NatsBus.connect(natsUrl);
  const stopCatalog = miniCatalog(bus, [], prefix);
  const samples = [];
  try {
    for (let i = 0; i < (quick ? 3 : 7); i++) samples.push(await oneFailover(bus, natsUrl, prefix, i));
  } finally {
    stopCatalog();
    await deleteFleetStreams(bus, prefix);
    await bus.close();
  }
  samples.sort((a, b) => a - b);
  const lease = figure('planner run lease (default)', DEFAULT_LEASE_MS, 'ms');
  return [
    lease,
    figure('planner failover median', samples[Math.floor(samples.length / 2)], 'ms', lease),
    figure('planner failover max', samples.at(-1), 'ms'),
  ];
}
