import { randomUUID } from 'node:crypto';
import { headers as natsHeaders, type MsgHdrs } from '@nats-io/nats-core';
import { z } from 'zod';
import type { Identity } from './schemas.js';

export const PROTOCOL_VERSION = 1;

/**
 * Metadata that travels with every agentmesh message as NATS headers, so bodies stay plain contract JSON that any
 * client can publish: protocol version, message id, timestamp, identity and W3C trace context.
 */
export const EnvelopeSchema = z.object({
  v: z.number().int().min(1),
  id: z.string(),
  ts: z.string(),
  identity: z
    .object({ tenant: z.string(), user: z.string().optional(), session: z.string().optional() })
    .optional(),
  traceparent: z.string().optional(),
  tracestate: z.string().optional(),
});
export type Envelope = z.infer<typeof EnvelopeSchema>;

export const Header = {
  Version: 'am-v',
  MessageId: 'am-id',
  Timestamp: 'am-ts',
  Tenant: 'am-tenant',
  User: 'am-user',
  Session: 'am-session',
  Status: 'am-status',
  Traceparent: 'traceparent',
  Tracestate: 'tracestate',
} as const;

export function createEnvelope(
  identity?: Identity,
  trace?: { traceparent?: string; tracestate?: string },
): Envelope {
  return {
    v: PROTOCOL_VERSION,
    id: randomUUID(),
    ts: new Date().toISOString(),
    ...(identity === undefined ? {} : { identity }),
    ...trace,
  };
}

export function envelopeToHeaders(envelope: Envelope): Record<string, string> {
  const h: Record<string, string> = {
    [Header.Version]: String(envelope.v),
    [Header.MessageId]: envelope.id,
    [Header.Timestamp]: envelope.ts,
  };
  if (envelope.identity !== undefined) {
    h[Header.Tenant] = envelope.identity.tenant;
    if (envelope.identity.user !== undefined) h[Header.User] = envelope.identity.user;
    if (envelope.identity.session !== undefined) h[Header.Session] = envelope.identity.session;
  }
  if (envelope.traceparent !== undefined) h[Header.Traceparent] = envelope.traceparent;
  if (envelope.tracestate !== undefined) h[Header.Tracestate] = envelope.tracestate;
  return h;
}

/** Reads an envelope back from headers; absent headers (a plain client) yield undefined. */
export function envelopeFromHeaders(headers: Record<string, string> | undefined): Envelope | undefined {
  if (headers === undefined || headers[Header.MessageId] === undefined) return undefined;
  const tenant = headers[Header.Tenant];
  return {
    v: Number(headers[Header.Version] ?? PROTOCOL_VERSION),
    id: headers[Header.MessageId] ?? '',
    ts: headers[Header.Timestamp] ?? '',
    ...(tenant === undefined
      ? {}
      : {
          identity: {
            tenant,
            ...(headers[Header.User] === undefined ? {} : { user: headers[Header.User] }),
            ...(headers[Header.Session] === undefined ? {} : { session: headers[Header.Session] }),
          },
        }),
    ...(headers[Header.Traceparent] === undefined ? {} : { traceparent: headers[Header.Traceparent] }),
    ...(headers[Header.Tracestate] === undefined ? {} : { tracestate: headers[Header.Tracestate] }),
  };
}

/** The envelope as NATS message headers, for publishing through the JetStream client. */
export function envelopeToNatsHeaders(envelope: Envelope): MsgHdrs {
  const h = natsHeaders();
  for (const [k, v] of Object.entries(envelopeToHeaders(envelope))) h.set(k, v);
  return h;
}
