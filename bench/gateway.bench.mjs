// The HTTP gateway's cost: submit a run and read its first event through `agentmesh gateway` (POST /v1/runs, then
// GET /v1/runs/{id}/events until the first frame) against the same path over NATS directly (submitRun, then the
// event log followed until the first event). Target: the gateway adds at most 1 ms p50.
import { performance } from 'node:perf_hooks';
import { NatsBus, silentLogger, streamNames } from '@agentmesh/protocol';
import { Planner, followRun, runsBucket, submitRun } from '@agentmesh/planner';
import { NatsRunSource, startGateway } from '@agentmesh/cli';
import { miniCatalog } from './embedded-mesh.mjs';
import { figure } from './lib.mjs';

export const title = 'Gateway: submit to first event, HTTP gateway vs NATS directly (us)';

const request = (id) => ({ id, task: 'bench', script: [{ text: 'ok' }] });

async function direct(bus, prefix, id) {
  const t0 = performance.now();
  const controller = new AbortController();
  let first;
  const seen = new Promise((resolve) => (first = resolve));
  await submitRun(bus, request(id), { prefix });
  const following = followRun(bus, id, { prefix, signal: controller.signal, onEvent: () => first() }).catch(
    () => undefined,
  );
  await seen;
  const us = (performance.now() - t0) * 1000;
  controller.abort();
  await following;
  return us;
}

async function viaGateway(url, id) {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(request(id)),
  });
  if (res.status !== 202) throw new Error(`submit: ${res.status} ${await res.text()}`);
  const stream = await fetch(`${url}/v1/runs/${id}/events`);
  const reader = stream.body.getReader();
  let text = '';
  while (!text.includes('\n\n')) text += new TextDecoder().decode((await reader.read()).value);
  const us = (performance.now() - t0) * 1000;
  await reader.cancel();
  return us;
}

function p50(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

export async function run({ natsUrl, quick }) {
  const prefix = `bgateway${process.pid}`;
  const bus = await NatsBus.connect(natsUrl);
  const client = await NatsBus.connect(natsUrl);
  const stopCatalog = miniCatalog(bus, [], prefix);
  const planner = new Planner({
    bus,
    prefix,
    logger: silentLogger(),
    plannerId: 'bench-gw',
    transcripts: false,
  });
  await planner.start();
  const gateway = await startGateway({
    bus: client,
    prefix,
    source: new NatsRunSource(client, prefix),
    logger: silentLogger(),
    keys: new Map(),
    port: 0,
  });
  const count = quick ? 40 : 200;
  const nats = [];
  const http = [];
  try {
    for (let i = 0; i < 10; i++) {
      await direct(client, prefix, `warm-d-${i}`);
      await viaGateway(gateway.url, `warm-g-${i}`);
    }
    for (let i = 0; i < count; i++) {
      nats.push(await direct(client, prefix, `d-${i}`));
      http.push(await viaGateway(gateway.url, `g-${i}`));
    }
  } finally {
    await gateway.close();
    await planner.drain();
    stopCatalog();
    const jsm = await bus.jetstreamManager();
    const names = streamNames(prefix);
    for (const st of [names.runs, names.events, `KV_${runsBucket(prefix)}`])
      await jsm.streams.delete(st).catch(() => undefined);
    await client.close();
    await bus.close();
  }
  const base = figure('NATS directly: submit to first event p50', p50(nats), 'us');
  return [
    base,
    figure('gateway: submit to first event p50', p50(http), 'us', base),
    figure('gateway: added p50', p50(http) - p50(nats), 'us'),
  ];
}
