// The HTTP gateway's cost: submit a one-turn run and read its events through `agentmesh gateway` (POST /v1/runs,
// then GET /v1/runs/{id}/events) against the same path over NATS directly (submitRun, then the event log followed),
// to the first event and to the final one. Target: the gateway adds at most 1 ms p50 to the first event.
import { performance } from 'node:perf_hooks';
import { NatsBus, silentLogger, streamNames } from '@agentmesh/protocol';
import { Planner, followRun, runsBucket, submitRun } from '@agentmesh/planner';
import { NatsRunSource, startGateway } from '@agentmesh/cli';
import { miniCatalog } from './embedded-mesh.mjs';
import { figure } from './lib.mjs';

export const title = 'Gateway: submit to first event, HTTP gateway vs NATS directly (us)';

const request = (id) => ({ id, task: 'bench', script: [{ text: 'ok' }] });

/** Submits over NATS and follows the event log: the time to the first event and to the final one (us). */
async function direct(bus, prefix, id) {
  const t0 = performance.now();
  let firstUs;
  await submitRun(bus, request(id), { prefix });
  await followRun(bus, id, {
    prefix,
    onEvent: () => (firstUs ??= (performance.now() - t0) * 1000),
  });
  return { first: firstUs, final: (performance.now() - t0) * 1000 };
}

/** Submits through the gateway and reads the run's SSE stream to its end: the same two times (us). */
async function viaGateway(url, id) {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(request(id)),
  });
  if (res.status !== 202) throw new Error(`submit: ${res.status} ${await res.text()}`);
  return readStream(t0, await fetch(`${url}/v1/runs/${id}/events`));
}

/** Submits through the gateway asking for the stream in the same request (`Accept: text/event-stream`). */
async function viaGatewayStreamed(url, id) {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(request(id)),
  });
  if (res.status !== 200) throw new Error(`submit: ${res.status} ${await res.text()}`);
  return readStream(t0, res);
}

async function readStream(t0, stream) {
  const decoder = new TextDecoder();
  let firstUs;
  for await (const chunk of stream.body) {
    if (firstUs === undefined && decoder.decode(chunk).includes('data: '))
      firstUs = (performance.now() - t0) * 1000;
  }
  return { first: firstUs, final: (performance.now() - t0) * 1000 };
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
  const oneRequest = [];
  try {
    for (let i = 0; i < 10; i++) {
      await direct(client, prefix, `warm-d-${i}`);
      await viaGateway(gateway.url, `warm-g-${i}`);
      await viaGatewayStreamed(gateway.url, `warm-s-${i}`);
    }
    for (let i = 0; i < count; i++) {
      nats.push(await direct(client, prefix, `d-${i}`));
      http.push(await viaGateway(gateway.url, `g-${i}`));
      oneRequest.push(await viaGatewayStreamed(gateway.url, `s-${i}`));
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
  const pick = (samples, key) => p50(samples.map((s) => s[key]));
  const base = figure('NATS directly: submit to first event p50', pick(nats, 'first'), 'us');
  const baseFinal = figure('NATS directly: submit to final event p50', pick(nats, 'final'), 'us');
  return [
    base,
    figure('gateway: submit to first event p50', pick(http, 'first'), 'us', base),
    figure('gateway: added p50 (first event)', pick(http, 'first') - pick(nats, 'first'), 'us'),
    figure(
      'gateway, one request (POST with Accept: text/event-stream): submit to first event p50',
      pick(oneRequest, 'first'),
      'us',
      base,
    ),
    figure(
      'gateway, one request: added p50 (first event)',
      pick(oneRequest, 'first') - pick(nats, 'first'),
      'us',
    ),
    baseFinal,
    figure('gateway: submit to final event p50', pick(http, 'final'), 'us', baseFinal),
  ];
}
