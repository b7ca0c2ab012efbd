import { afterAll, describe, expect, inject, it } from 'vitest';
import { MemoryBus } from './bus/memory-bus.js';
import { NatsBus } from './bus/nats-bus.js';
import type { Bus } from './bus/types.js';
import {
  createEnvelope,
  envelopeFromHeaders,
  envelopeToHeaders,
  EnvelopeSchema,
  PROTOCOL_VERSION,
} from './envelope.js';

const buses: Bus[] = [];
afterAll(async () => {
  for (const b of buses) await b.close();
});

describe.each([
  ['MemoryBus', async () => new MemoryBus()],
  ['NatsBus', async () => NatsBus.connect(inject('natsUrl'))],
])('envelope headers (%s)', (_name, makeBus) => {
  it('carry version, id, timestamp, identity and trace context across the bus', async () => {
    const bus = await makeBus();
    buses.push(bus);
    const envelope = createEnvelope(
      { tenant: 'acme', user: 'u1', session: 's9' },
      { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: 'am=1' },
    );
    const subject = `envelope.${process.pid}.${Math.random().toString(36).slice(2)}`;
    const received = new Promise<ReturnType<typeof envelopeFromHeaders>>((resolve) => {
      bus.subscribe(subject, (msg) => resolve(envelopeFromHeaders(msg.headers)));
    });
    await bus.flush();
    bus.publish(subject, '{}', { headers: envelopeToHeaders(envelope) });
    const back = await received;
    expect(back).toEqual(envelope);
    expect(EnvelopeSchema.parse(back)).toMatchObject({ v: PROTOCOL_VERSION, identity: { tenant: 'acme' } });
  });

  it('is absent for a plain client that sends no headers', async () => {
    expect(envelopeFromHeaders(undefined)).toBeUndefined();
    expect(envelopeFromHeaders({ other: 'x' })).toBeUndefined();
  });
});
