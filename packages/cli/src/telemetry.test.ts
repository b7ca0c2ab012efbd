import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
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

  it.each([
    ['http/protobuf', 'application/x-protobuf'],
    ['http/json', 'application/json'],
  ])(
    'exports spans over OTLP %s to OTEL_EXPORTER_OTLP_ENDPOINT/v1/traces on shutdown',
    async (protocol, type) => {
      const received: { path: string | undefined; type: string | undefined; bytes: Buffer }[] = [];
      const collector = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          received.push({ path: req.url, type: req.headers['content-type'], bytes: Buffer.concat(chunks) });
          res.writeHead(200).end();
        });
      });
      await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
      try {
        const port = (collector.address() as AddressInfo).port;
        telemetry = startTelemetry({
          command: 'catalog',
          env: {
            OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
            OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
          },
        });
        trace.getTracer('t').startSpan('exported-span').end();
        await telemetry!.shutdown();
        telemetry = undefined;
        expect(received).toHaveLength(1);
        expect(received[0]!.path).toBe('/v1/traces');
        expect(received[0]!.type).toContain(type);
        expect(received[0]!.bytes.toString('latin1')).toContain('exported-span');
        expect(received[0]!.bytes.toString('latin1')).toContain('agentmesh-catalog');
      } finally {
        collector.closeAllConnections();
        await new Promise<void>((resolve) => collector.close(() => resolve()));
      }
    },
  );
});
