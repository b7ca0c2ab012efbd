import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { AgentMeshError, ErrorCode } from '../errors.js';
import { MemoryBus } from './memory-bus.js';
import { NatsBus } from './nats-bus.js';
import { INBOX_SUBJECT } from '../subjects.js';
import type { Bus, BusMessage } from './types.js';

const settle = (ms = 50) => new Promise((r) => setTimeout(r, ms));
let counter = 0;
const unique = (base: string) => `contract.${process.pid}.${++counter}.${base}`;

/** One contract, two buses: every behaviour the actors rely on. */
function busContract(name: string, makeBus: () => Promise<Bus>) {
  describe(`Bus contract: ${name}`, () => {
    let bus: Bus;
    let other: Bus;
    beforeAll(async () => {
      bus = await makeBus();
      other = bus.kind === 'memory' ? bus : await makeBus();
    });
    afterAll(async () => {
      if (other !== bus) await other.close();
      await bus.close();
    });

    it('delivers published messages with headers to every plain subscriber', async () => {
      const subject = unique('fanout');
      const seen: string[] = [];
      const a = bus.subscribe(subject, (m) => void seen.push(`a:${m.text()}:${m.headers?.['x-k']}`));
      const b = other.subscribe(subject, (m) => void seen.push(`b:${m.text()}:${m.headers?.['x-k']}`));
      await bus.flush();
      await other.flush();
      bus.publish(subject, 'hi', { headers: { 'x-k': 'v' } });
      await bus.flush();
      await settle();
      expect(seen.sort()).toEqual(['a:hi:v', 'b:hi:v']);
      a.unsubscribe();
      b.unsubscribe();
    });

    it('matches * and > wildcards', async () => {
      const base = unique('wild');
      const got: string[] = [];
      const s1 = bus.subscribe(`${base}.*.events`, (m) => void got.push(`star:${m.subject}`));
      const s2 = bus.subscribe(`${base}.>`, (m) => void got.push(`gt:${m.subject}`));
      await bus.flush();
      bus.publish(`${base}.r1.events`, 'x');
      bus.publish(`${base}.r1.other.deep`, 'y');
      await bus.flush();
      await settle();
      expect(got.sort()).toEqual([
        `gt:${base}.r1.events`,
        `gt:${base}.r1.other.deep`,
        `star:${base}.r1.events`,
      ]);
      s1.unsubscribe();
      s2.unsubscribe();
    });

    it('shares a queue group: each message goes to exactly one member, and members share the load', async () => {
      const subject = unique('queue');
      const counts = { a: 0, b: 0 };
      const a = bus.subscribe(subject, () => void counts.a++, { queue: 'q' });
      const b = other.subscribe(subject, () => void counts.b++, { queue: 'q' });
      await bus.flush();
      await other.flush();
      for (let i = 0; i < 200; i++) bus.publish(subject, String(i));
      await bus.flush();
      await settle(150);
      expect(counts.a + counts.b).toBe(200);
      expect(counts.a).toBeGreaterThan(0);
      expect(counts.b).toBeGreaterThan(0);
      a.unsubscribe();
      b.unsubscribe();
    });

    it('answers requests, with many in flight, each reply to its own request', async () => {
      const subject = unique('echo');
      const sub = other.subscribe(subject, (m) => {
        other.respond(m, `re:${m.text()}`, { headers: { 'x-echo': m.headers?.['x-id'] ?? '' } });
      });
      await other.flush();
      const replies = await Promise.all(
        Array.from({ length: 64 }, (_, i) =>
          bus.request(subject, String(i), { headers: { 'x-id': String(i) } }),
        ),
      );
      replies.forEach((r: BusMessage, i) => {
        expect(r.text()).toBe(`re:${i}`);
        expect(r.headers?.['x-echo']).toBe(String(i));
      });
      sub.unsubscribe();
    });

    it('gives a request only its own reply: a late reply after a timeout, a guessed or unknown reply subject and a malformed one are ignored', async () => {
      const subject = unique('routing');
      const held: BusMessage[] = [];
      const arrived: (() => void)[] = [];
      const sub = other.subscribe(subject, (m) => {
        held.push(m);
        arrived.shift()?.();
      });
      await other.flush();
      const next = () => new Promise<void>((resolve) => arrived.push(resolve));
      const firstHeld = next();
      const timedOut = await bus.request(subject, 'first', { timeoutMs: 100 }).catch((e: unknown) => e);
      expect((timedOut as AgentMeshError).code).toBe(ErrorCode.Timeout);
      await firstHeld;
      const secondHeld = next();
      const second = bus.request(subject, 'second', { timeoutMs: 10_000 });
      await secondHeld;
      const [late, current] = held as [BusMessage, BusMessage];
      const reply = current.reply!;
      // the same reply prefix with another secret or handle: what a responder of another call could guess
      const cut = reply.lastIndexOf('.') + 1;
      const guessedSecret = `${reply.slice(0, cut)}${'A'.repeat(24)}${reply.slice(cut + 24)}`;
      other.respond(late, 'late');
      for (const forged of [
        guessedSecret,
        `${reply}0`,
        `${reply.slice(0, cut)}x`,
        `${reply.slice(0, cut)}${reply.slice(cut, cut + 24)}1_999999`,
      ])
        other.publish(forged, 'forged');
      other.respond(current, 'right');
      expect((await second).text()).toBe('right');
      sub.unsubscribe();
    });

    it('carries non-ASCII subjects and empty, binary and text payloads byte for byte, both ways', async () => {
      const subject = `${unique('bytes')}.grüße.日本`;
      const sub = other.subscribe(subject, (m) => void other.respond(m, m.data));
      await other.flush();
      const payloads = [
        new Uint8Array(0),
        Uint8Array.from({ length: 256 }, (_, i) => i),
        new TextEncoder().encode('ünïcødé ✓\r\nPUB x 1\r\n'),
      ];
      for (const payload of payloads) {
        const reply = await bus.request(subject, payload);
        expect(Array.from(reply.data)).toEqual(Array.from(payload));
      }
      sub.unsubscribe();
    });

    it('refuses a subject or reply subject that would break the protocol line, and sends nothing', async () => {
      const base = unique('inject');
      const got: string[] = [];
      const sub = other.subscribe(`${base}.>`, (m) => void got.push(m.subject));
      await other.flush();
      const breaking = [
        '',
        `${base}.a b`,
        `${base}.a\tb`,
        `${base}.a\r\nPUB ${base}.x 1\r\ny`,
        `${base}.a\u0000b`,
      ];
      for (const bad of breaking) {
        expect(() => bus.publish(bad, 'x')).toThrow(/invalid subject/);
        expect(() => bus.publish(`${base}.ok`, 'x', { reply: bad })).toThrow(/invalid subject/);
        await expect(bus.request(bad, 'x', { timeoutMs: 500 })).rejects.toMatchObject({
          code: ErrorCode.InvalidMessage,
        });
      }
      bus.publish(`${base}.last`, 'x');
      await bus.flush();
      await settle();
      expect(got).toEqual([`${base}.last`]);
      sub.unsubscribe();
    });

    it('fails fast with no_responders when nobody listens', async () => {
      const started = Date.now();
      const error = await bus.request(unique('nobody'), 'x', { timeoutMs: 3000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AgentMeshError);
      expect((error as AgentMeshError).code).toBe(ErrorCode.NoResponders);
      expect((error as AgentMeshError).retryable).toBe(true);
      expect(Date.now() - started).toBeLessThan(2500);
    });

    it('times out a request nobody answers', async () => {
      const subject = unique('silent');
      const sub = other.subscribe(subject, () => undefined);
      await other.flush();
      const error = await bus.request(subject, 'x', { timeoutMs: 100 }).catch((e: unknown) => e);
      expect((error as AgentMeshError).code).toBe(ErrorCode.Timeout);
      sub.unsubscribe();
    });

    it('cancels a request through its AbortSignal', async () => {
      const subject = unique('slow');
      const sub = other.subscribe(subject, () => undefined);
      await other.flush();
      const controller = new AbortController();
      const pending = bus.request(subject, 'x', { timeoutMs: 5000, signal: controller.signal });
      setTimeout(() => controller.abort(new Error('user stop')), 20);
      const error = await pending.catch((e: unknown) => e);
      expect((error as AgentMeshError).code).toBe(ErrorCode.Cancelled);
      expect((error as AgentMeshError).message).toContain('user stop');
      const already = await bus
        .request(subject, 'x', { signal: AbortSignal.abort() })
        .catch((e: unknown) => e);
      expect((already as AgentMeshError).code).toBe(ErrorCode.Cancelled);
      sub.unsubscribe();
    });

    it('rejects payloads above maxPayload with payload_too_large, naming sizes', async () => {
      const big = new Uint8Array(bus.maxPayload + 1);
      expect(() => bus.publish(unique('big'), big)).toThrow(/exceeds the bus limit/);
      const error = await bus.request(unique('big'), big).catch((e: unknown) => e);
      expect((error as AgentMeshError).code).toBe(ErrorCode.PayloadTooLarge);
      expect((error as AgentMeshError).details?.['size']).toBe(bus.maxPayload + 1);
    });

    it('survives handlers that throw or reject', async () => {
      const subject = unique('throws');
      let calls = 0;
      const s1 = other.subscribe(subject, () => {
        calls++;
        throw new Error('boom');
      });
      const s2 = other.subscribe(`${subject}.async`, async (m) => {
        calls++;
        if (m.text() === 'fail') throw new Error('async boom');
        other.respond(m, 'ok');
      });
      await other.flush();
      bus.publish(subject, 'a');
      bus.publish(`${subject}.async`, 'fail');
      const reply = await bus.request(`${subject}.async`, 'fine');
      expect(reply.text()).toBe('ok');
      expect(calls).toBe(3);
      s1.unsubscribe();
      s2.unsubscribe();
    });

    it('drains a subscription: in-flight handlers finish, later messages are not taken', async () => {
      const subject = unique('drain');
      let finished = 0;
      const sub = other.subscribe(subject, async () => {
        await settle(80);
        finished++;
      });
      await other.flush();
      bus.publish(subject, '1');
      await bus.flush();
      await settle(20);
      await sub.drain();
      expect(finished).toBe(1);
      bus.publish(subject, '2');
      await settle(100);
      expect(finished).toBe(1);
    });

    it('stops delivery after unsubscribe', async () => {
      const subject = unique('unsub');
      let n = 0;
      const sub = other.subscribe(subject, () => void n++);
      await other.flush();
      sub.unsubscribe();
      await other.flush();
      bus.publish(subject, 'x');
      await settle();
      expect(n).toBe(0);
    });
  });
}

busContract('MemoryBus', async () => new MemoryBus());
busContract('NatsBus (real nats-server)', async () => NatsBus.connect(inject('natsUrl')));

describe('MemoryBus specifics', () => {
  it('fails operations after close with a closed error', async () => {
    const bus = new MemoryBus();
    await bus.close();
    expect(() => bus.publish('a.b', 'x')).toThrow(/closed/);
    await expect(bus.request('a.b', 'x')).rejects.toMatchObject({ code: ErrorCode.Closed });
  });
  it('refuses invalid subjects', async () => {
    const bus = new MemoryBus();
    expect(() => bus.publish('a..b', 'x')).toThrow(/invalid subject/);
    expect(() => bus.publish('a.*', 'x')).toThrow(/invalid subject/);
    await expect(bus.request('a.>', 'x')).rejects.toMatchObject({ code: ErrorCode.InvalidMessage });
    await expect(bus.requestValue('a.*', { x: 1 })).rejects.toMatchObject({ code: ErrorCode.InvalidMessage });
  });

  it('hands a request and its reply over as values to their one receiver, unencoded', async () => {
    const bus = new MemoryBus();
    const sent = { args: { n: 1, list: [1, 'two', null, { deep: true }] }, text: 'grüße' };
    const output = { result: { n: 2 } };
    const served: unknown[] = [];
    bus.subscribe(
      'svc.value',
      (msg) => {
        served.push(msg.value);
        expect(bus.respondValue(msg, output)).toBe(true);
      },
      { queue: 'q' },
    );
    const reply = await bus.requestValue('svc.value', sent);
    expect(served).toEqual([sent]);
    expect(served[0]).toBe(sent);
    expect(reply.value).toBe(output);
    expect(JSON.parse(reply.text())).toEqual(output);
    await bus.close();
  });

  it('gives receivers of a value sent to many, and receivers of text, the JSON text', async () => {
    const bus = new MemoryBus();
    const seen: [unknown, string][] = [];
    bus.subscribe('fan.value', (msg) => void seen.push([msg.value, msg.text()]));
    bus.subscribe('fan.*', (msg) => {
      seen.push([msg.value, new TextDecoder().decode(msg.data)]);
      bus.respond(msg, '{"ok":true}');
    });
    const reply = await bus.requestValue('fan.value', { a: [1, 2] });
    expect(seen).toEqual([
      [undefined, '{"a":[1,2]}'],
      [undefined, '{"a":[1,2]}'],
    ]);
    expect(reply.value).toBeUndefined();
    expect(reply.text()).toBe('{"ok":true}');
    await bus.close();
  });
  it('says whether a subject has subscribers: exact, wildcard and queue subscriptions, until they go', () => {
    const bus = new MemoryBus();
    expect(bus.hasSubscribers('runs.r1.events')).toBe(false);
    const wild = bus.subscribe('runs.*.events', () => undefined);
    expect(bus.hasSubscribers('runs.r1.events')).toBe(true);
    expect(bus.hasSubscribers('runs.r1.other')).toBe(false);
    wild.unsubscribe();
    expect(bus.hasSubscribers('runs.r1.events')).toBe(false);
    const queued = bus.subscribe('runs.r1.events', () => undefined, { queue: 'q' });
    expect(bus.hasSubscribers('runs.r1.events')).toBe(true);
    queued.unsubscribe();
    expect(bus.hasSubscribers('runs.r1.events')).toBe(false);
  });
});

describe('NatsBus specifics', () => {
  it('counts every published message in the connection statistics', async () => {
    const bus = await NatsBus.connect(inject('natsUrl'));
    try {
      const before = bus.nc.stats();
      const bodies = ['x', 'grüße', '', JSON.stringify({ n: 1 })];
      for (const body of bodies) bus.publish(`stats.${process.pid}.a`, body);
      bus.publish(`stats.${process.pid}.b`, Uint8Array.of(1, 2, 3));
      await bus.flush();
      const after = bus.nc.stats();
      expect(after.outMsgs - before.outMsgs).toBe(bodies.length + 1);
      expect(after.outBytes - before.outBytes).toBe(bodies.reduce((n, b) => n + Buffer.byteLength(b), 0) + 3);
    } finally {
      await bus.close();
    }
  });

  it('publishes bodies, empty bodies, reply subjects and headers that another connection reads as sent', async () => {
    const bus = await NatsBus.connect(inject('natsUrl'));
    const reader = await NatsBus.connect(inject('natsUrl'));
    try {
      const subject = `published.${process.pid}.a`;
      const got: { reply: string | undefined; text: string; headers: unknown }[] = [];
      const all = new Promise<void>((resolve) =>
        reader.subscribe(subject, (msg) => {
          got.push({ reply: msg.reply, text: msg.text(), headers: msg.headers?.['x-am'] });
          if (got.length === 4) resolve();
        }),
      );
      await reader.flush();
      bus.publish(subject, 'grüße');
      bus.publish(subject, '', { reply: '_INBOX.published.1' });
      bus.publish(subject, Uint8Array.of(0x7b, 0x7d));
      bus.publish(subject, 'with headers', { headers: { 'x-am': '1' } });
      await all;
      expect(got).toEqual([
        { reply: undefined, text: 'grüße', headers: undefined },
        { reply: '_INBOX.published.1', text: '', headers: undefined },
        { reply: undefined, text: '{}', headers: undefined },
        { reply: undefined, text: 'with headers', headers: '1' },
      ]);
    } finally {
      await bus.close();
      await reader.close();
    }
  });

  it('makes inboxes unique with 12 random characters, not a 22-character nuid (they are in every call three times)', async () => {
    const bus = await NatsBus.connect(inject('natsUrl'));
    try {
      const inboxes = new Set(Array.from({ length: 1000 }, () => bus.createInbox()));
      expect(inboxes.size).toBe(1000);
      for (const inbox of inboxes) expect(inbox).toMatch(/^_INBOX\.[A-Za-z0-9_-]{12}$/);
    } finally {
      await bus.close();
    }
  });

  it('says clearly when NATS is unreachable', async () => {
    const error = await NatsBus.connect('nats://127.0.0.1:1', { connectTimeoutMs: 500 }).catch(
      (e: unknown) => e,
    );
    expect((error as AgentMeshError).code).toBe(ErrorCode.Unavailable);
    expect((error as AgentMeshError).message).toMatch(/cannot connect to NATS at nats:\/\/127\.0\.0\.1:1/);
  });
});

describe('NatsBus specifics', () => {
  it('answers only on inbox reply subjects: a request cannot make a responder publish on a fleet subject', async () => {
    const url = inject('natsUrl');
    const responder = await NatsBus.connect(url);
    const requester = await NatsBus.connect(url);
    try {
      const service = unique('svc');
      const victim = unique('runs.r1.cancel');
      const inbox = `_INBOX.${unique('reply')}`;
      responder.subscribe(service, (msg) => void responder.respond(msg, `answer to ${msg.text()}`));
      const onVictim: string[] = [];
      const onInbox: string[] = [];
      requester.subscribe(victim, (m) => void onVictim.push(m.text()));
      const answered = new Promise<void>((resolve) => {
        requester.subscribe(inbox, (m) => {
          onInbox.push(m.text());
          resolve();
        });
      });
      await requester.flush();
      await responder.flush();
      requester.publish(service, 'forged', { reply: victim });
      requester.publish(service, 'honest', { reply: inbox });
      await answered;
      expect(onInbox).toEqual(['answer to honest']);
      expect(onVictim).toEqual([]);
      expect(INBOX_SUBJECT.test(victim)).toBe(false);
    } finally {
      await requester.close();
      await responder.close();
    }
  });
});

describe('NatsBus requestCallback', () => {
  it('gives the reply in the turn it arrives, and no_responders, timeout and refusals once, never inside the call', async () => {
    const url = inject('natsUrl');
    const responder = await NatsBus.connect(url);
    const requester = await NatsBus.connect(url);
    try {
      const service = unique('cb');
      responder.subscribe(service, (msg) => void responder.respond(msg, `re ${msg.text()}`));
      await responder.flush();
      const ask = (subject: string, body: string, timeoutMs = 5000) =>
        new Promise<{ error: unknown; reply: string | undefined; calls: number; inCall: boolean }>(
          (resolve) => {
            let calls = 0;
            let inCall = true;
            requester.requestCallback(subject, body, { timeoutMs }, (error, reply) => {
              calls++;
              const seen = { error, reply: reply?.text(), calls, inCall };
              setTimeout(() => resolve({ ...seen, calls }), 20);
            });
            inCall = false;
          },
        );
      expect(await ask(service, 'a')).toMatchObject({
        error: undefined,
        reply: 're a',
        calls: 1,
        inCall: false,
      });
      const none = await ask(unique('nobody'), 'b');
      expect((none.error as AgentMeshError).code).toBe(ErrorCode.NoResponders);
      expect(none).toMatchObject({ calls: 1, inCall: false });
      const silent = unique('silent');
      requester.subscribe(silent, () => undefined);
      await requester.flush();
      const late = await ask(silent, 'c', 100);
      expect((late.error as AgentMeshError).code).toBe(ErrorCode.Timeout);
      const refused = await ask('bad subject', 'd');
      expect(refused).toMatchObject({ calls: 1, inCall: false, reply: undefined });
      expect(refused.error).toBeInstanceOf(AgentMeshError);
    } finally {
      await requester.close();
      await responder.close();
    }
  });
});
