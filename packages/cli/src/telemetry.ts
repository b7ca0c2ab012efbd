import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import {
  detectResources,
  envDetector,
  hostDetector,
  processDetector,
  resourceFromAttributes,
} from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  ParentBasedSampler,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';
import { telemetryRequested, type Env } from './telemetry-env.js';

export { telemetryRequested } from './telemetry-env.js';

/** The default `service.name` of each command (OTEL_SERVICE_NAME wins). */
export const SERVICE_NAMES: Readonly<Record<string, string>> = {
  planner: 'agentmesh-planner',
  worker: 'agentmesh-tool-worker',
  catalog: 'agentmesh-catalog',
  console: 'agentmesh-console',
};

export interface Telemetry {
  readonly serviceName: string;
  /** Exports what is buffered, then stops the SDK. */
  shutdown(): Promise<void>;
}

function badEnv(name: string, value: string, expected: string): AgentMeshError {
  return new AgentMeshError(ErrorCode.InvalidConfig, `${name}="${value}" is not supported: use ${expected}`);
}

/** OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, or OTEL_EXPORTER_OTLP_ENDPOINT with `/v1/traces` appended. */
function tracesEndpoint(env: Env): string | undefined {
  const traces = env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'];
  if (traces) return traces;
  const base = env['OTEL_EXPORTER_OTLP_ENDPOINT'];
  return base ? `${base.replace(/\/+$/, '')}/v1/traces` : undefined;
}

function exporterFor(name: string, env: Env): SpanProcessor {
  if (name === 'console') return new SimpleSpanProcessor({ exporter: new ConsoleSpanExporter() });
  if (name !== 'otlp') throw badEnv('OTEL_TRACES_EXPORTER', name, 'otlp, console or none');
  const protocolVar = env['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL']
    ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
    : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = env[protocolVar] || 'http/protobuf';
  if (protocol !== 'http/protobuf' && protocol !== 'http/json')
    throw badEnv(protocolVar, protocol, 'http/protobuf or http/json');
  const url = tracesEndpoint(env);
  const config = url === undefined ? {} : { url };
  const exporter = protocol === 'http/json' ? new OtlpJsonExporter(config) : new OtlpProtoExporter(config);
  const num = (key: string) => (env[key] ? Number(env[key]) : undefined);
  return new BatchSpanProcessor({
    exporter,
    ...(num('OTEL_BSP_SCHEDULE_DELAY') === undefined
      ? {}
      : { scheduledDelayMillis: num('OTEL_BSP_SCHEDULE_DELAY')! }),
    ...(num('OTEL_BSP_MAX_QUEUE_SIZE') === undefined
      ? {}
      : { maxQueueSize: num('OTEL_BSP_MAX_QUEUE_SIZE')! }),
    ...(num('OTEL_BSP_MAX_EXPORT_BATCH_SIZE') === undefined
      ? {}
      : { maxExportBatchSize: num('OTEL_BSP_MAX_EXPORT_BATCH_SIZE')! }),
    ...(num('OTEL_BSP_EXPORT_TIMEOUT') === undefined
      ? {}
      : { exportTimeoutMillis: num('OTEL_BSP_EXPORT_TIMEOUT')! }),
  });
}

/** OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG (default parentbased_always_on). */
export function samplerFromEnv(env: Env = process.env): Sampler {
  const name = env['OTEL_TRACES_SAMPLER'] || 'parentbased_always_on';
  const ratio = Number(env['OTEL_TRACES_SAMPLER_ARG'] ?? '1');
  const root = name.replace(/^parentbased_/, '');
  const base =
    root === 'always_on'
      ? new AlwaysOnSampler()
      : root === 'always_off'
        ? new AlwaysOffSampler()
        : root === 'traceidratio'
          ? new TraceIdRatioBasedSampler(Number.isFinite(ratio) ? ratio : 1)
          : undefined;
  if (base === undefined)
    throw badEnv(
      'OTEL_TRACES_SAMPLER',
      name,
      'always_on, always_off, traceidratio or their parentbased_ forms',
    );
  return name.startsWith('parentbased_') ? new ParentBasedSampler({ root: base }) : base;
}

/**
 * Starts the OpenTelemetry SDK for this process when {@link telemetryRequested}; configured by the standard OTEL_*
 * variables only (exporter, endpoint, headers, protocol http/protobuf or http/json, sampler, batch settings,
 * resource attributes). Returns undefined, and registers nothing, otherwise.
 */
export function startTelemetry(options: { command: string; env?: Env }): Telemetry | undefined {
  const env = options.env ?? process.env;
  if (!telemetryRequested(env)) return undefined;
  const serviceName = env['OTEL_SERVICE_NAME'] || SERVICE_NAMES[options.command] || 'agentmesh';
  const exporters = (env['OTEL_TRACES_EXPORTER'] || 'otlp')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '' && s !== 'none');
  const resource = resourceFromAttributes({
    'service.name': serviceName,
    'service.version': '0.1.0',
    'service.namespace': 'agentmesh',
  }).merge(detectResources({ detectors: [envDetector, hostDetector, processDetector] }));
  const provider = new TracerProvider({
    resource,
    sampler: samplerFromEnv(env),
    spanProcessors: exporters.map((name) => exporterFor(name, env)),
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(
    new CompositePropagator({
      propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()],
    }),
  );
  trace.setGlobalTracerProvider(provider);
  return {
    serviceName,
    shutdown: async () => {
      await provider.shutdown().catch(() => undefined);
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
}
