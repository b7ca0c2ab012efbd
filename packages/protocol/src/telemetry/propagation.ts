import {
  ROOT_CONTEXT,
  context,
  propagation,
  type Context,
  type TextMapGetter,
  type TextMapSetter,
} from '@opentelemetry/api';
import type { BusHeaders } from '../bus/types.js';

/** The W3C trace context headers that travel on every bus subject. */
export const TRACE_HEADERS = ['traceparent', 'tracestate'] as const;

const headerSetter: TextMapSetter<BusHeaders> = {
  set: (carrier, key, value) => {
    carrier[key] = value;
  },
};

const headerGetter: TextMapGetter<BusHeaders | undefined> = {
  keys: (carrier) => (carrier ? Object.keys(carrier) : []),
  get: (carrier, key) => {
    if (!carrier) return undefined;
    const direct = carrier[key];
    if (direct !== undefined) return direct;
    const lower = key.toLowerCase();
    for (const name of Object.keys(carrier)) if (name.toLowerCase() === lower) return carrier[name];
    return undefined;
  },
};

/**
 * Writes the trace context of `ctx` (default: the active context) into bus headers as `traceparent` /
 * `tracestate` through the globally registered propagator, and returns the headers. With no SDK registered the
 * propagator is a no-op and the headers come back unchanged (`undefined` stays `undefined`: no allocation).
 */
export function injectTraceHeaders(
  headers: BusHeaders | undefined,
  ctx: Context = context.active(),
): BusHeaders | undefined {
  const carrier: BusHeaders = {};
  propagation.inject(ctx, carrier, headerSetter);
  if (carrier['traceparent'] === undefined && carrier['tracestate'] === undefined) return headers;
  return headers ? Object.assign(headers, carrier) : carrier;
}

/**
 * Reads `traceparent` / `tracestate` from bus headers (any letter case) into a context derived from `parent`
 * (default: the root context, so a message handler does not inherit an unrelated active span).
 */
export function extractTraceContext(
  headers: BusHeaders | undefined,
  parent: Context = ROOT_CONTEXT,
): Context {
  if (headers === undefined) return parent;
  return propagation.extract(parent, headers, headerGetter);
}
