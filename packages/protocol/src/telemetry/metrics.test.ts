import { afterEach, describe, expect, it } from 'vitest';
import {
  NOOP_METRICS,
  actorMetrics,
  createActorMetrics,
  setProcessMetrics,
  startMetricsServer,
  type MetricsServer,
} from './index.js';

/** The value of the one sample of `name` whose labels are exactly `labels` (any order), from Prometheus text. */
function sampleValue(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries(
      [...(m[2] ?? '').matchAll(/([a-z_]+)="([^"]*)"/g)].map((l) => [l[1], l[2]]),
    );
    if (JSON.stringify(Object.entries(got).sort()) === JSON.stringify(Object.entries(labels).sort()))
      return Number(m[3]);
  }
  return undefined;
}

let server: MetricsServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
  setProcessMetrics(NOOP_METRICS);
});

describe('actor metrics', () => {
  it('records the agentmesh metric set and serves it at /metrics', async () => {
    const metrics = createActorMetrics('planner');
    metrics.runStarted();
    metrics.runsInFlight(1);
    metrics.modelCall({ provider: 'openai', model: 'gpt-4o', inputTokens: 10, outputTokens: 4 });
    metrics.toolCall({ tool: 'math.calc', outcome: 'ok', durationSeconds: 0.002 });
    metrics.toolCall({ tool: 'math.calc', outcome: 'error', durationSeconds: 0.2 });
    metrics.runsInFlight(-1);
    metrics.runFinished('done', 1.5);
    metrics.setCatalogTools({ registered: 7, available: 5 });
    metrics.toolCallRefused('math.calc');
    metrics.toolCallRefused('math.calc');
    metrics.capacityNotice('math.calc');
    metrics.setTenantQueueDepth('acme', 4);
    metrics.tenantQueueWait('acme', 0.25);
    let polled = 0;
    metrics.onCollect(() => {
      polled++;
      metrics.setIntakeLag(3);
    });
    server = await startMetricsServer(metrics, { port: 0, host: '127.0.0.1' });
    const res = await fetch(`http://127.0.0.1:${server.port}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    expect(polled).toBe(1);
    const expected: [string, Record<string, string>, number][] = [
      ['agentmesh_runs_started_total', {}, 1],
      ['agentmesh_runs_finished_total', { status: 'done' }, 1],
      ['agentmesh_run_duration_seconds_count', { status: 'done' }, 1],
      ['agentmesh_run_duration_seconds_sum', { status: 'done' }, 1.5],
      ['agentmesh_model_calls_total', { provider: 'openai', model: 'gpt-4o', outcome: 'ok' }, 1],
      ['agentmesh_model_tokens_total', { provider: 'openai', model: 'gpt-4o', direction: 'input' }, 10],
      ['agentmesh_model_tokens_total', { provider: 'openai', model: 'gpt-4o', direction: 'output' }, 4],
      ['agentmesh_tool_calls_total', { tool: 'math.calc', outcome: 'ok' }, 1],
      ['agentmesh_tool_calls_total', { tool: 'math.calc', outcome: 'error' }, 1],
      ['agentmesh_tool_call_duration_seconds_bucket', { tool: 'math.calc', le: '0.005' }, 1],
      ['agentmesh_tool_call_duration_seconds_count', { tool: 'math.calc' }, 2],
      ['agentmesh_runs_in_flight', {}, 0],
      ['agentmesh_catalog_tools', { state: 'registered' }, 7],
      ['agentmesh_catalog_tools', { state: 'available' }, 5],
      ['agentmesh_intake_lag', {}, 3],
      ['agentmesh_admission_queue_depth', {}, 0],
      ['agentmesh_tool_calls_in_flight', {}, 0],
      ['agentmesh_tool_calls_refused_total', { tool: 'math.calc' }, 2],
      ['agentmesh_capacity_notices_total', { tool: 'math.calc' }, 1],
      ['agentmesh_tenant_queued_runs', { tenant: 'acme' }, 4],
      ['agentmesh_tenant_queue_wait_seconds_count', { tenant: 'acme' }, 1],
      ['agentmesh_tenant_queue_wait_seconds_sum', { tenant: 'acme' }, 0.25],
    ];
    for (const [name, labels, value] of expected)
      expect(sampleValue(text, name, { actor: 'planner', ...labels }), name).toBe(value);
    expect(text).toContain('# TYPE agentmesh_tool_call_duration_seconds histogram');
    expect((await fetch(`http://127.0.0.1:${server.port}/other`)).status).toBe(404);
  });

  it('two actors keep separate registries', async () => {
    const a = createActorMetrics('tool-worker');
    const b = createActorMetrics('tool-worker');
    a.toolCall({ tool: 'x.y', outcome: 'ok', durationSeconds: 0.01 });
    expect(await a.scrape()).toContain(
      'agentmesh_tool_calls_total{tool="x.y",outcome="ok",actor="tool-worker"} 1',
    );
    expect(await b.scrape()).not.toContain('tool="x.y"');
  });

  it('a process records nothing until metrics are installed', () => {
    expect(actorMetrics()).toBe(NOOP_METRICS);
    const m = createActorMetrics('catalog');
    setProcessMetrics(m);
    expect(actorMetrics()).toBe(m);
  });

  it('a scrape that fails answers 500 with the reason', async () => {
    const m = createActorMetrics('catalog');
    m.onCollect(() => Promise.reject(new Error('nats down')));
    server = await startMetricsServer(m, { port: 0, host: '127.0.0.1' });
    const res = await fetch(`http://127.0.0.1:${server.port}/metrics`);
    expect(res.status).toBe(500);
    expect(await res.text()).toContain('nats down');
  });
});
