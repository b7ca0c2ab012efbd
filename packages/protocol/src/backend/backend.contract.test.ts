import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { ErrorCode } from '../errors.js';
import { connectBackend, memoryBackend } from '../connect.js';
import { readEntries } from '../stores/kv.js';
import type { Backend, LoggedEvent } from './types.js';

const enc = new TextEncoder();
const dec = new TextDecoder();
let counter = 0;
const unique = (base: string) => `bc_${process.pid}_${++counter}_${base}`;
const text = (events: LoggedEvent[]) => events.map((e) => `${e.seq}:${dec.decode(e.data)}`);

/** Resolves once `check` holds, polling on a short interval (waits on state, not on a fixed sleep). */
async function until(check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** One contract, two backends: every part the actors rely on beyond the bus (the bus has its own suite). */
function backendContract(name: string, makeBackend: () => Promise<Backend>) {
  describe(`Backend contract: ${name}`, () => {
    let backend: Backend;
    beforeAll(async () => {
      backend = await makeBackend();
    });
    afterAll(async () => {
      await backend.close();
    });

    it('keeps KV entries with revisions, create/update conflicts, delete, keys and watch', async () => {
      const kv = await backend.kv(unique('kv'));
      const seen: string[] = [];
      const watcher = await kv.watch((e) => seen.push(`${e.operation}:${e.key}`), { updatesOnly: true });
      const r1 = await kv.create('a.one', enc.encode('1'));
      await expect(kv.create('a.one', enc.encode('x'))).rejects.toMatchObject({ code: ErrorCode.Conflict });
      const r2 = await kv.update('a.one', enc.encode('2'), r1);
      expect(r2).toBeGreaterThan(r1);
      await expect(kv.update('a.one', enc.encode('3'), r1)).rejects.toMatchObject({
        code: ErrorCode.Conflict,
      });
      await kv.put('a.two', enc.encode('t'));
      expect(dec.decode((await kv.get('a.one'))!.value)).toBe('2');
      expect((await kv.keys('a.*')).sort()).toEqual(['a.one', 'a.two']);
      await kv.delete('a.two');
      expect(await kv.get('a.two')).toBeNull();
      await until(() => seen.length >= 4);
      watcher.stop();
      expect(seen).toEqual(['PUT:a.one', 'PUT:a.one', 'PUT:a.two', 'DEL:a.two']);
      // a deleted key can be created again: the trigger queue keeps its skip marks until a daemon ends for this
      await expect(kv.create('a.two', enc.encode('again'))).resolves.toBeGreaterThan(r2);
      expect(await (await backend.kv(unique('kv'))).get('a.one')).toBeNull();
    });

    it('tells in one read whether any key under a prefix holds something', async () => {
      const kv = await backend.kv(unique('kv'));
      expect(await kv.mayHaveKeys!('run-1.>')).toBe(false);
      await kv.put('run-2.paused', enc.encode('p'));
      await kv.put('run-10.paused', enc.encode('p'));
      expect(await kv.mayHaveKeys!('run-1.>')).toBe(false);
      await kv.put('run-1.has_input', enc.encode('i'));
      expect(await kv.mayHaveKeys!('run-1.>')).toBe(true);
      expect(await kv.mayHaveKeys!('run-1.paused')).toBe(false);
    });

    it('lists each key once while another writer keeps writing', async () => {
      const kv = await backend.kv(unique('kv'));
      const keys = Array.from({ length: 20 }, (_, i) => `run.k${i}`);
      for (const key of keys) await kv.put(key, enc.encode('0'));
      await kv.put('other', enc.encode('x'));
      let writing = true;
      const writer = (async () => {
        for (let n = 1; writing; n++) await kv.put(keys[n % keys.length]!, enc.encode(String(n)));
      })();
      try {
        for (let round = 0; round < 30; round++)
          expect((await kv.keys('run.>')).sort()).toEqual([...keys].sort());
      } finally {
        writing = false;
        await writer;
      }
    });

    it('reads the current entries of the matching keys, leaving deleted keys out', async () => {
      const kv = await backend.kv(unique('kv'));
      for (let i = 0; i < 150; i++) await kv.put(`run.k${String(i).padStart(3, '0')}`, enc.encode(String(i)));
      await kv.put('other', enc.encode('x'));
      await kv.delete('run.k007');
      const entries = await readEntries(kv, 'run.>');
      expect(entries.map((e) => e.key).sort()).toEqual(
        Array.from({ length: 150 }, (_, i) => `run.k${String(i).padStart(3, '0')}`).filter(
          (k) => k !== 'run.k007',
        ),
      );
      expect(entries.every((e) => dec.decode(e.value) === String(Number(e.key.slice(5))))).toBe(true);
    });

    it('a KV watch that knows its own writes still gets every other entry with its value, in order', async () => {
      const bucket = unique('kv');
      const kv = await backend.kv(bucket);
      const other = await backend.kv(bucket);
      const mine = new Set<number>();
      const seen: { key: string; revision: number; value: string }[] = [];
      const watcher = await kv.watch(
        (e) => seen.push({ key: e.key, revision: e.revision, value: dec.decode(e.value) }),
        { updatesOnly: true, known: (_key, revision) => mine.has(revision) },
      );
      mine.add(await kv.put('w.mine', enc.encode('own record')));
      await other.put('w.theirs', enc.encode('their record'));
      mine.add(await kv.put('w.mine', enc.encode('own again')));
      await other.delete('w.theirs');
      await until(() => seen.length >= 4);
      watcher.stop();
      expect(seen.map((e) => e.key)).toEqual(['w.mine', 'w.theirs', 'w.mine', 'w.theirs']);
      expect(seen[1]!.value).toBe('their record');
      expect(seen.map((e) => e.revision)).toEqual([...seen.map((e) => e.revision)].sort((a, b) => a - b));
    });

    it('stores blobs with their type and metadata', async () => {
      const blobs = await backend.blobs(unique('blobs'));
      const data = Uint8Array.from({ length: 300_000 }, (_, i) => i % 251);
      await blobs.put('report.bin', data, { mime: 'application/x-test', meta: { run: 'r1' } });
      const got = await blobs.get('report.bin');
      expect(got?.info).toMatchObject({ size: data.length, mime: 'application/x-test', meta: { run: 'r1' } });
      expect(Buffer.from(got!.data).equals(Buffer.from(data))).toBe(true);
      await blobs.delete('report.bin');
      expect(await blobs.info('report.bin')).toBeNull();
    });

    it('runs a work queue: dedupe, one consumer per message, ack, nak with delay, term, counts', async () => {
      const stream = unique('WQ').toUpperCase();
      const queue = await backend.workQueue({ stream, subject: `${stream}.submit` });
      const first = await queue.submit(enc.encode('job-1'), { dedupeId: 'j1', headers: { 'x-k': 'v' } });
      expect(await queue.submit(enc.encode('job-1 again'), { dedupeId: 'j1' })).toEqual({
        seq: first.seq,
        duplicate: true,
      });
      await queue.submit(enc.encode('job-2'), { dedupeId: 'j2' });
      const a = await queue.consumer('workers', { ackWaitMs: 30_000 });
      const b = await queue.consumer('workers', { ackWaitMs: 30_000 });
      const one = (await a.next({ expiresMs: 5_000 }))!;
      const two = (await b.next({ expiresMs: 5_000 }))!;
      expect([one.text(), two.text()].sort()).toEqual(['job-1', 'job-2']);
      expect((one.text() === 'job-1' ? one : two).headers?.['x-k']).toBe('v');
      expect(await a.counts()).toEqual({ pending: 0, ackPending: 2 });
      expect(await a.next({ expiresMs: 300 })).toBeUndefined();
      one.nak(200);
      const again = (await b.next({ expiresMs: 10_000 }))!;
      expect([again.seq, again.text(), again.deliveries]).toEqual([one.seq, one.text(), 2]);
      again.working();
      await again.ack();
      two.term();
      await until(async () => (await a.counts()).ackPending === 0);
      expect(await a.counts()).toEqual({ pending: 0, ackPending: 0 });
      expect((await queue.consumers()).map((c) => c.name)).toEqual(['workers']);
    });

    it('removes only the first matching message of one subject from a seq on, within its looks', async () => {
      const stream = unique('WQ').toUpperCase();
      const [submit, other] = [`${stream}.submit`, `${stream}.other`];
      const queue = await backend.workQueue({ stream, subject: submit, moreSubjects: [other] });
      const put = (subject: string, body: string) =>
        queue.submit(enc.encode(body), { dedupeId: `${subject}-${body}`, subject });
      await put(submit, 'a');
      const b = await put(submit, 'b');
      await put(other, 'b');
      await put(submit, 'd');
      const mine = await queue.consumer('mine', { ackWaitMs: 30_000, filterSubject: submit });
      const theirs = await queue.consumer('theirs', { ackWaitMs: 30_000, filterSubject: other });
      const body = (text: string) => ({
        fromSeq: 1,
        maxLooks: 10,
        matches: (m: { data: Uint8Array }) => dec.decode(m.data) === text,
      });
      expect(await queue.remove(submit, body('c'))).toBe(false);
      expect(await queue.remove(submit, { ...body('b'), fromSeq: b.seq + 1 })).toBe(false);
      expect(await queue.remove(submit, { ...body('b'), maxLooks: 1 })).toBe(false);
      expect(await queue.remove(`${stream}.*`, body('b'))).toBe(false);
      expect(await mine.counts()).toEqual({ pending: 3, ackPending: 0 });
      expect(await queue.remove(submit, { ...body('b'), fromSeq: b.seq })).toBe(true);
      expect(await mine.counts()).toEqual({ pending: 2, ackPending: 0 });
      expect(await theirs.counts()).toEqual({ pending: 1, ackPending: 0 });
      expect(await queue.remove(submit, body('b'))).toBe(false);
      const left: string[] = [];
      for (let item; (item = await mine.next({ expiresMs: 1_000 })) !== undefined; await item.ack())
        left.push(item.text());
      expect(left).toEqual(['a', 'd']);
    });

    it('redelivers a message not acked within the ack wait', async () => {
      const stream = unique('WQ').toUpperCase();
      const queue = await backend.workQueue({ stream, subject: `${stream}.submit` });
      await queue.submit(enc.encode('slow'), { dedupeId: 's1' });
      const consumer = await queue.consumer('workers', { ackWaitMs: 1_000 });
      const taken = (await consumer.next({ expiresMs: 5_000 }))!;
      const redelivered = (await consumer.next({ expiresMs: 10_000 }))!;
      expect([redelivered.seq, redelivered.deliveries]).toEqual([taken.seq, 2]);
      await redelivered.ack();
    });

    it('stops waiting for work when the signal aborts', async () => {
      const stream = unique('WQ').toUpperCase();
      const queue = await backend.workQueue({ stream, subject: `${stream}.submit` });
      const consumer = await queue.consumer('workers', { ackWaitMs: 5_000 });
      const stop = new AbortController();
      const started = Date.now();
      const waiting = consumer.next({ expiresMs: 20_000, signal: stop.signal });
      setTimeout(() => stop.abort(), 100);
      expect(await waiting).toBeUndefined();
      expect(Date.now() - started).toBeLessThan(10_000);
    });

    it('keeps a pull open across messages, asking for one at a time; a stopped pull takes nothing more', async () => {
      const stream = unique('WQ').toUpperCase();
      const queue = await backend.workQueue({ stream, subject: `${stream}.submit` });
      const submit = (body: string) => queue.submit(enc.encode(body), { dedupeId: body });
      // the ack wait is longer than the test: a message that went to a taker that dropped it would never come back
      const consumer = await queue.consumer('workers', { ackWaitMs: 120_000 });
      const stop = new AbortController();
      const pull = await consumer.pull({ expiresMs: 1_000, signal: stop.signal });
      const first = pull.next();
      await submit('job-1');
      const one = (await first)!;
      expect([one.text(), one.deliveries]).toEqual(['job-1', 1]);
      // the pull holds job-1 and has asked for nothing since: job-2 goes to another taker at once
      await submit('job-2');
      const other = await consumer.next({ expiresMs: 5_000 });
      expect(other?.text()).toBe('job-2');
      // asked again, it takes the next message
      const second = pull.next();
      await submit('job-3');
      expect((await second)?.text()).toBe('job-3');
      await Promise.all([one.ack(), other!.ack()]);
      // a next waiting when the pull stops resolves undefined, and the pull's open request takes nothing
      const third = pull.next();
      stop.abort();
      expect(await third).toBeUndefined();
      expect(await pull.next()).toBeUndefined();
      await submit('job-4');
      const after = await consumer.next({ expiresMs: 5_000 });
      expect([after?.text(), after?.deliveries]).toEqual(['job-4', 1]);
      await after!.ack();
      const stopped = await consumer.pull({ expiresMs: 1_000 });
      stopped.stop();
      await submit('job-5');
      expect(await stopped.next()).toBeUndefined();
      expect((await consumer.next({ expiresMs: 5_000 }))?.text()).toBe('job-5');
    });

    it('keeps an event log gapless: expected seq, idempotent retries, conflicts, replay, last', async () => {
      const stream = unique('EV').toUpperCase();
      const log = await backend.eventLog({ stream, subjects: `${stream}.*.events` });
      const subject = `${stream}.r1.events`;
      const live: string[] = [];
      const sub = backend.subscribe(subject, (m) => void live.push(m.text()));
      await backend.flush();
      expect(await log.last(subject)).toBeUndefined();
      await log.append(subject, 1, enc.encode('e1'));
      await log.append(subject, 2, enc.encode('e2'));
      await log.append(subject, 2, enc.encode('e2'));
      await expect(log.append(subject, 4, enc.encode('e4'))).rejects.toMatchObject({
        code: ErrorCode.Conflict,
      });
      await log.append(subject, 3, enc.encode('e3'));
      expect(text(await log.replay(subject))).toEqual(['1:e1', '2:e2', '3:e3']);
      expect(text(await log.replay(subject, { fromSeq: 2 }))).toEqual(['2:e2', '3:e3']);
      expect(text([(await log.last(subject))!])).toEqual(['3:e3']);
      expect(await log.replay(`${stream}.other.events`)).toEqual([]);
      await until(() => live.length === 3);
      expect(live).toEqual(['e1', 'e2', 'e3']);
      sub.unsubscribe();
    });

    it('replays every event stored when the replay began, gapless, while a writer keeps appending', async () => {
      const stream = unique('EV').toUpperCase();
      const log = await backend.eventLog({ stream, subjects: `${stream}.*.events` });
      const subject = `${stream}.busy.events`;
      let appended = 0;
      while (appended < 40) await log.append(subject, ++appended, enc.encode(`e${appended}`));
      let writing = true;
      const writer = (async () => {
        while (writing) await log.append(subject, ++appended, enc.encode(`e${appended}`));
      })();
      try {
        for (let round = 0; round < 10; round++) {
          const stored = appended - 1; // at most one append is in flight
          const seqs = (await log.replay(subject)).map((e) => e.seq);
          expect(seqs.length).toBeGreaterThanOrEqual(stored);
          expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));
        }
      } finally {
        writing = false;
        await writer;
      }
    });

    it('refuses a stale writer: the handle that appended a seq first wins, another body for that seq gets conflict', async () => {
      const stream = unique('EV').toUpperCase();
      const a = await backend.eventLog({ stream, subjects: `${stream}.*.events` });
      const b = await backend.eventLog({ stream, subjects: `${stream}.*.events` });
      const subject = `${stream}.r2.events`;
      await a.append(subject, 1, enc.encode('a1'));
      await b.append(subject, 2, enc.encode('b2'));
      await expect(a.append(subject, 2, enc.encode('a2'))).rejects.toMatchObject({
        code: ErrorCode.Conflict,
      });
      await expect(a.append(subject, 2, enc.encode('b2'))).resolves.toBeUndefined();
      expect(text(await a.replay(subject))).toEqual(['1:a1', '2:b2']);
      await expect(a.append(subject, 4, enc.encode('a4'))).rejects.toMatchObject({
        code: ErrorCode.Conflict,
      });
    });

    it('lets a writer go on after another handle appended since its own last append', async () => {
      const stream = unique('EV').toUpperCase();
      const a = await backend.eventLog({ stream, subjects: `${stream}.*.events` });
      const b = await backend.eventLog({ stream, subjects: `${stream}.*.events` });
      const subject = `${stream}.r4.events`;
      await a.append(subject, 1, enc.encode('a1'));
      await a.append(subject, 2, enc.encode('a2'));
      await b.append(subject, 3, enc.encode('b3'));
      await expect(a.append(subject, 4, enc.encode('a4'))).resolves.toBeUndefined();
      expect(text(await b.replay(subject))).toEqual(['1:a1', '2:a2', '3:b3', '4:a4']);
    });

    it('follows a log from a seq: stored events, then live ones, once each; stop releases the follower', async () => {
      const stream = unique('EV').toUpperCase();
      const log = await backend.eventLog({ stream, subjects: `${stream}.*.events` });
      const subject = `${stream}.r3.events`;
      for (const seq of [1, 2, 3]) await log.append(subject, seq, enc.encode(`e${seq}`));
      const got: string[] = [];
      const follower = await log.follow(subject, (e) => got.push(`${e.seq}:${dec.decode(e.data)}`), {
        fromSeq: 2,
      });
      await until(() => got.length === 2);
      await log.append(subject, 4, enc.encode('e4'));
      await until(() => got.length === 3);
      expect(got).toEqual(['2:e2', '3:e3', '4:e4']);
      expect(await log.followerCount()).toBe(1);
      await follower.stop();
      await until(async () => (await log.followerCount()) === 0);
    });

    it('grants a lease to one holder at a time, fences the old epoch, frees it on release', async () => {
      const leases = await backend.leases(unique('leases'));
      const first = await leases.acquire('run-1', 'planner-a', 10_000);
      expect(first).toMatchObject({ acquired: true, lease: { owner: 'planner-a', epoch: 1 } });
      expect(await leases.acquire('run-1', 'planner-b', 10_000)).toMatchObject({
        acquired: false,
        holder: 'planner-a',
      });
      const lease = first.acquired ? first.lease : undefined;
      const renewed = await leases.renew(lease!, 10_000);
      expect(renewed.epoch).toBe(1);
      const short = await leases.acquire('run-2', 'planner-a', 1);
      await until(async () => (await leases.holder('run-2')) === undefined);
      const taken = await leases.acquire('run-2', 'planner-b', 10_000);
      expect(taken).toMatchObject({ acquired: true, lease: { owner: 'planner-b', epoch: 2 } });
      await expect(leases.renew(short.acquired ? short.lease : lease!, 10_000)).rejects.toMatchObject({
        code: ErrorCode.Conflict,
        details: { lease_lost: true },
      });
      await leases.release(renewed);
      expect(await leases.holder('run-1')).toBeUndefined();
      expect(await leases.acquire('run-1', 'planner-b', 10_000)).toMatchObject({
        acquired: true,
        lease: { epoch: 2 },
      });
      await expect(leases.renew(renewed, 10_000)).rejects.toMatchObject({ code: ErrorCode.Conflict });
    });

    it('announces and discovers services', async () => {
      const name = unique('svc');
      const handle = await backend.announce({
        name,
        version: '1.2.3',
        description: 'x',
        metadata: { k: 'v' },
      });
      const found = await backend.discover(name, 1_000);
      expect(found).toMatchObject([{ name, version: '1.2.3', metadata: { k: 'v' } }]);
      await handle.stop();
      expect(await backend.discover(name, 500)).toEqual([]);
    });

    it('reports stream facts, and none for a stream that does not exist', async () => {
      const stream = unique('WQ').toUpperCase();
      const queue = await backend.workQueue({ stream, subject: `${stream}.submit` });
      await queue.submit(enc.encode('x'), { dedupeId: 'x' });
      expect(await backend.streamFacts(stream)).toMatchObject({ name: stream, messages: 1, replicas: 1 });
      expect(await backend.streamFacts(unique('NONE').toUpperCase())).toBeUndefined();
    });
  });
}

backendContract('memory', async () => memoryBackend());
backendContract('NATS (real nats-server)', async () => connectBackend({ servers: inject('natsUrl') }));

describe('NATS work queue pull', () => {
  it('rejects the waiting next when the consumer is deleted or the connection closes', async () => {
    const backend = await connectBackend({ servers: inject('natsUrl') });
    const stream = unique('WQ').toUpperCase();
    const nc = await connect({ servers: inject('natsUrl') });
    try {
      const queue = await backend.workQueue({ stream, subject: `${stream}.submit` });
      const pull = await (await queue.consumer('gone', { ackWaitMs: 60_000 })).pull({ expiresMs: 1_000 });
      const waiting = expect(pull.next()).rejects.toThrow(/consumer deleted/);
      await (await jetstreamManager(nc)).consumers.delete(stream, 'gone');
      await waiting;
      const closing = await (
        await queue.consumer('closing', { ackWaitMs: 60_000 })
      ).pull({ expiresMs: 1_000 });
      const open = expect(closing.next()).rejects.toMatchObject({ code: ErrorCode.Unavailable });
      await backend.close();
      await open;
    } finally {
      await backend.close().catch(() => undefined);
      await nc.close();
    }
  });
});

describe('NATS backend assets', () => {
  it('accepts a comma-separated server list', async () => {
    const url = inject('natsUrl');
    const backend = await connectBackend({ servers: `nats://127.0.0.1:1, ${url}`, connectTimeoutMs: 5_000 });
    await backend.close();
  });

  it('updates an existing stream whose max_age differs from the wanted one', async () => {
    const backend = await connectBackend({ servers: inject('natsUrl') });
    const stream = unique('EV').toUpperCase();
    try {
      await backend.eventLog({ stream, subjects: `${stream}.*.events`, maxAgeMs: 60_000 });
      await backend.eventLog({ stream, subjects: `${stream}.*.events`, maxAgeMs: 120_000 });
      const nc = await connect({ servers: inject('natsUrl') });
      const info = await (await jetstreamManager(nc)).streams.info(stream);
      await nc.close();
      expect(info.config.max_age).toBe(120_000 * 1_000_000);
    } finally {
      await backend.close();
    }
  });

  it('says which asset and setting cannot take replicas 3 on a single server', async () => {
    const backend = await connectBackend({ servers: inject('natsUrl'), replicas: 3 });
    const stream = unique('WQ').toUpperCase();
    try {
      const error = await backend.workQueue({ stream, subject: `${stream}.submit` }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: ErrorCode.InvalidConfig });
      expect((error as Error).message).toMatch(new RegExp(`JetStream asset "${stream}".*replicas 3`));
      const kvError = await backend.kv(unique('kv')).catch((e: unknown) => e);
      expect((kvError as Error).message).toMatch(/JetStream asset "KV_.*replicas 3/);
    } finally {
      await backend.close();
    }
  });

  it('names the asset, the setting and both values when an existing asset cannot be changed', async () => {
    const one = await connectBackend({ servers: inject('natsUrl') });
    const three = await connectBackend({ servers: inject('natsUrl'), replicas: 3 });
    const stream = unique('EV').toUpperCase();
    try {
      await one.eventLog({ stream, subjects: `${stream}.*.events` });
      const error = await three.eventLog({ stream, subjects: `${stream}.*.events` }).catch((e: unknown) => e);
      expect(error).toMatchObject({
        code: ErrorCode.InvalidConfig,
        details: { asset: stream, setting: 'replicas', wanted: 3 },
      });
    } finally {
      await one.close();
      await three.close();
    }
  });

  it('refuses a replicas value JetStream cannot have', async () => {
    await expect(connectBackend({ servers: inject('natsUrl'), replicas: 0 })).rejects.toMatchObject({
      code: ErrorCode.InvalidConfig,
    });
  });
});
