import { afterEach, describe, expect, it } from 'vitest';
import { trace } from '@opentelemetry/api';
import { tracingActive } from '@agentmesh/protocol';
import { samplerFromEnv, startTelemetry, telemetryRequested, type Telemetry } from './telemetry.js';

let telemetry: Telemetry | undefined;
afterEach(async () => {
  await telemetry?.shutdown();
  telemetry = undefined;
});

describe('telemetry from OTEL_* variables', () => {
  it('is off unless an OTLP endpoint or a traces exporter is configured', () => {
    expect(telemetryRequested({})).toBe(false);
    expect(telemetryRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(telemetryRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' })).toBe(true);
    expect(telemetryRequested({ OTEL_TRACES_EXPORTER: 'console' })).toBe(true);
    expect(
      telemetryRequested({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c' }),
    ).toBe(false);
    expect(telemetryRequested({ OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'otlp' })).toBe(false);
    expect(startTelemetry({ command: 'planner', env: {} })).toBeUndefined();
    expect(tracingActive()).toBe(false);
  });

  it('names the service per actor unless OTEL_SERVICE_NAME says otherwise, and registers the SDK', async () => {
    telemetry = startTelemetry({
      command: 'worker',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' },
    });
    expect(telemetry?.serviceName).toBe('agentmesh-tool-worker');
    expect(tracingActive()).toBe(true);
    expect(trace.getTracer('x').startSpan('s').isRecording()).toBe(true);
    await telemetry!.shutdown();
    telemetry = undefined;
    expect(tracingActive()).toBe(false);
    telemetry = startTelemetry({
      command: 'planner',
      env: { OTEL_TRACES_EXPORTER: 'otlp', OTEL_SERVICE_NAME: 'my-planner' },
    });
    expect(telemetry?.serviceName).toBe('my-planner');
  });

  it('refuses a protocol, exporter or sampler it does not support, naming the variable', () => {
    expect(() =>
      startTelemetry({
        command: 'planner',
        env: { OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      }),
    ).toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL="grpc".*http\/protobuf or http\/json/);
    expect(() => startTelemetry({ command: 'planner', env: { OTEL_TRACES_EXPORTER: 'zipkin' } })).toThrow(
      /OTEL_TRACES_EXPORTER="zipkin"/,
    );
    expect(() => samplerFromEnv({ OTEL_TRACES_SAMPLER: 'sometimes' })).toThrow(/OTEL_TRACES_SAMPLER/);
    expect(
      samplerFromEnv({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' }).toString(),
    ).toContain('0.25');
    expect(tracingActive()).toBe(false);
  });
});
