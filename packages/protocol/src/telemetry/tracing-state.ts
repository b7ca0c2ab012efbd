import { ProxyTracerProvider, trace } from '@opentelemetry/api';

const NOOP_DELEGATE = new ProxyTracerProvider().getDelegate();

/**
 * True once a real tracer provider (an OpenTelemetry SDK) is registered globally. Hooks on hot paths check this
 * first, so with no SDK they cost a property read and no span is created.
 */
export function tracingActive(): boolean {
  const provider = trace.getTracerProvider();
  return provider instanceof ProxyTracerProvider ? provider.getDelegate() !== NOOP_DELEGATE : true;
}
