// What decides whether a process traces, apart from the OpenTelemetry SDK: the CLI checks it before loading the SDK.

export type Env = Record<string, string | undefined>;

/** Tracing is on when OTEL_EXPORTER_OTLP_ENDPOINT (or the traces one) or OTEL_TRACES_EXPORTER is set (and not `none`). */
export function telemetryRequested(env: Env = process.env): boolean {
  if (env['OTEL_SDK_DISABLED'] === 'true') return false;
  const exporter = env['OTEL_TRACES_EXPORTER']?.trim();
  if (exporter !== undefined && exporter !== '') return exporter !== 'none';
  return Boolean(env['OTEL_EXPORTER_OTLP_ENDPOINT'] || env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']);
}
