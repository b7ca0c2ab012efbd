import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { NatsBus, encodeJson, subjects } from '@agentmesh/protocol';
import { followRun } from '@agentmesh/planner';
import { REPO_ROOT, cleanEnv, startActor, type ActorProcess } from './helpers/cli.js';
import { startOtlpReceiver, type OtlpReceiver } from './helpers/otlp-receiver.js';
import { dropPrefix, uniquePrefix } from './fixtures/llm/nats.js';

const natsUrl = inject('natsUrl');
const prefix = uniquePrefix('search-trace');
const TRACE_ID = '5cf92f3577b34da6a3ce929d0e0e4737';
const PARENT = '10f067aa0ba902b8';

/** A run's tool_search reaches the catalog process inside the run's trace. */
describe('catalog search spans across processes', () => {
  let receiver: OtlpReceiver;
  let bus: NatsBus;
  const actors: ActorProcess[] = [];
  const env = () =>
    cleanEnv({
      NATS_URL: natsUrl,
      AGENTMESH_PREFIX: prefix,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    bus = await NatsBus.connect(natsUrl);
    actors.push(await startActor(['catalog'], env()));
    actors.push(...(await Promise.all([startActor(['planner'], env()), startActor(['worker'], env())])));
  }, 90_000);
  afterAll(async () => {
    await Promise.all(actors.map((a) => a.stop()));
    if (bus) {
      await dropPrefix(bus, prefix);
      await bus.close();
    }
    await receiver?.close();
  }, 60_000);

  it('the catalog records a server catalog.search span, child of the planner tool_search call', async () => {
    const runId = `run-search-trace-${Date.now()}`;
    const script = (
      JSON.parse(readFileSync(join(REPO_ROOT, 'examples', 'search.json'), 'utf8')) as { turns: unknown[] }
    ).turns;
    const h = natsHeaders();
    h.set('traceparent', `00-${TRACE_ID}-${PARENT}-01`);
    await bus
      .jetstream()
      .publish(
        subjects(prefix).runsSubmit,
        encodeJson({ id: runId, task: 'hash hello', provider: 'scripted', deferred: ['crypto.*'], script }),
        { msgID: runId, headers: h },
      );
    const final = await followRun(bus, runId, { prefix });
    expect(final.type === 'run.completed' && final.status).toBe('done');

    const spans = await receiver.waitFor(
      (all) =>
        all.some((s) => s.traceId === TRACE_ID && s.service === 'agentmesh-catalog') &&
        all.some((s) => s.traceId === TRACE_ID && s.name === 'execute_tool tool_search'),
      60_000,
    );
    const mine = spans.filter((s) => s.traceId === TRACE_ID);
    const server = mine.find((s) => s.service === 'agentmesh-catalog' && s.name === 'catalog.search');
    const call = mine.find((s) => s.name === 'execute_tool tool_search');
    expect(server, JSON.stringify(mine.map((s) => [s.service, s.name]))).toBeDefined();
    expect(server!.kind).toBe(2); // SERVER
    expect(server!.parentSpanId).toBe(call!.spanId);
    expect(server!.attributes).toMatchObject({
      'agentmesh.catalog.search.query': 'sha256 hash of text',
      'agentmesh.catalog.search.strategy': expect.any(String),
    });
    expect(server!.attributes['agentmesh.catalog.search.results']).toBeGreaterThanOrEqual(1);
  }, 120_000);
});
