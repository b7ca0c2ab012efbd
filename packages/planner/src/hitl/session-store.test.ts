import { describe, expect, it } from 'vitest';
import { AgentMeshError, ErrorCode, MemoryBlobStore, MemoryKvStore } from '@agentmesh/protocol';
import { SessionStore, assertSessionId } from './session-store.js';

const never = new AbortController().signal;
const store = () => new SessionStore(new MemoryBlobStore(), new MemoryKvStore());
const hello = [
  { role: 'user' as const, content: 'hello' },
  { role: 'assistant' as const, content: 'hi' },
];

describe('assertSessionId', () => {
  it('accepts [A-Za-z0-9._-]{1,128} and names the problem otherwise', () => {
    expect(() => assertSessionId('proj-1.alpha_2')).not.toThrow();
    expect(() => assertSessionId('x'.repeat(129))).toThrow(/1-128 characters/);
    expect(() => assertSessionId('a/b')).toThrow(/only letters, digits/);
    expect(() => assertSessionId('')).toThrow(/1-128/);
    expect(() => assertSessionId(7)).toThrow(/must be a string/);
  });
});

describe('SessionStore', () => {
  it('appends runs, lists, forks and deletes, per tenant', async () => {
    const s = store();
    await s.appendRun('acme', 'chat', { run_id: 'r1', messages: hello });
    const second = await s.appendRun('acme', 'chat', { run_id: 'r2', messages: hello });
    expect(second.runs).toEqual(['r1', 'r2']);
    expect(second.messages).toHaveLength(4);
    expect((await s.list('acme')).map((x) => x.session)).toEqual(['chat']);

    await s.fork('acme', 'chat', 'chat-2');
    expect((await s.get('acme', 'chat-2'))?.messages).toHaveLength(4);
    await expect(s.fork('acme', 'chat', 'chat-2')).rejects.toMatchObject({ code: 'conflict' });

    await s.delete('acme', 'chat');
    expect(await s.get('acme', 'chat')).toBeUndefined();
    await expect(s.delete('acme', 'chat')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('never shows one tenant another tenant’s session', async () => {
    const s = store();
    await s.appendRun('acme', 'chat', { run_id: 'r1', messages: hello });
    expect(await s.get('globex', 'chat')).toBeUndefined();
    expect(await s.list('globex')).toEqual([]);
    await expect(s.fork('globex', 'chat', 'mine')).rejects.toMatchObject({ code: 'not_found' });
    await expect(s.delete('globex', 'chat')).rejects.toMatchObject({ code: 'not_found' });
    expect(await s.get('acme', 'chat')).toBeDefined();
  });

  it('lets one run at a time hold a session; the next one waits and then proceeds', async () => {
    const s = store();
    const first = await s.lock('acme', 'chat', { runId: 'r1', ttlMs: 60_000, signal: never });
    let secondTaken = false;
    const second = s.lock('acme', 'chat', { runId: 'r2', ttlMs: 60_000, signal: never }).then((h) => {
      secondTaken = true;
      return h;
    });
    await new Promise((r) => setImmediate(r));
    expect(secondTaken).toBe(false);
    const again = await s.lock('acme', 'chat', { runId: 'r1', ttlMs: 60_000, signal: never });
    expect(again.runId).toBe('r1');
    await first.release();
    await expect(second).resolves.toMatchObject({ runId: 'r2' });
  });

  it('a lock released while the next run starts its watch wakes that run (no wait for the 60 s ttl)', async () => {
    const kv = new MemoryKvStore();
    const s = new SessionStore(new MemoryBlobStore(), kv);
    const first = await s.lock('acme', 'chat', { runId: 'r1', ttlMs: 60_000, signal: never });
    // the holder releases after the waiter read the lock and before its watch is up
    const watch = kv.watch.bind(kv);
    kv.watch = async (...args) => {
      await first.release();
      return watch(...args);
    };
    const bound = new AbortController();
    const timer = setTimeout(() => bound.abort(), 5_000);
    const second = await s.lock('acme', 'chat', { runId: 'r2', ttlMs: 60_000, signal: bound.signal });
    clearTimeout(timer);
    expect(second.runId).toBe('r2');
  });

  it('takes over a lock whose holder stopped renewing it', async () => {
    const s = store();
    await s.lock('acme', 'chat', { runId: 'dead', ttlMs: 50, signal: never });
    const started = Date.now();
    const handle = await s.lock('acme', 'chat', { runId: 'r2', ttlMs: 60_000, signal: never });
    expect(handle.runId).toBe('r2');
    expect(Date.now() - started).toBeGreaterThanOrEqual(40);
  });

  it('stops waiting when the signal aborts', async () => {
    const s = store();
    await s.lock('acme', 'chat', { runId: 'r1', ttlMs: 60_000, signal: never });
    const controller = new AbortController();
    const waiting = s.lock('acme', 'chat', { runId: 'r2', ttlMs: 60_000, signal: controller.signal });
    controller.abort();
    await expect(waiting).rejects.toMatchObject({ code: 'cancelled' });
  });
});

describe('SessionStore and schema_version', () => {
  it('saves sessions with schema_version 1 and refuses to continue one of a newer version', async () => {
    const blobs = new MemoryBlobStore();
    const s = new SessionStore(blobs, new MemoryKvStore());
    await s.appendRun('acme', 'chat', { run_id: 'r1', messages: hello });
    expect(await s.get('acme', 'chat')).toMatchObject({ schema_version: 1, runs: ['r1'] });
    const name = `sessions/${Buffer.from('acme').toString('base64url')}/chat`;
    const stored = JSON.parse(new TextDecoder().decode((await blobs.get(name))!.data)) as object;
    await blobs.put(name, new TextEncoder().encode(JSON.stringify({ ...stored, schema_version: 3 })), {
      mime: 'application/json',
    });
    await expect(s.appendRun('acme', 'chat', { run_id: 'r2', messages: hello })).rejects.toMatchObject({
      code: 'unavailable',
      details: { schema_version: 3 },
    });
  });
});

describe('SessionLockHandle', () => {
  it('learns it lost a lock that expired and was taken by another run: no renewal or release over it', async () => {
    const s = store();
    const first = await s.lock('acme', 'chat', { runId: 'r1', ttlMs: 50, signal: never });
    const second = await s.lock('acme', 'chat', { runId: 'r2', ttlMs: 60_000, signal: never });
    expect(await first.renew()).toBe(false);
    expect(first.held).toBe(false);
    await first.release();
    expect(await s.tryLock('acme', 'chat', { runId: 'r3', ttlMs: 60_000 })).toBeUndefined();
    expect(await second.renew()).toBe(true);
    await second.release();
    expect((await s.tryLock('acme', 'chat', { runId: 'r3', ttlMs: 60_000 }))?.runId).toBe('r3');
  });

  it('takes its own renewal that landed without an answer as its own', async () => {
    const kv = new MemoryKvStore();
    let lose = false;
    const update = kv.update.bind(kv);
    kv.update = async (key, value, revision) => {
      const written = await update(key, value, revision);
      if (!lose) return written;
      lose = false;
      throw new AgentMeshError(ErrorCode.Conflict, 'no answer');
    };
    const s = new SessionStore(new MemoryBlobStore(), kv);
    const handle = await s.lock('acme', 'chat', { runId: 'r1', ttlMs: 60_000, signal: never });
    lose = true;
    expect(await handle.renew()).toBe(true);
    expect(await handle.renew()).toBe(true);
    expect(handle.held).toBe(true);
  });

  it('tryLock does not wait for a live holder', async () => {
    const s = store();
    await s.lock('acme', 'chat', { runId: 'r1', ttlMs: 60_000, signal: never });
    expect(await s.tryLock('acme', 'chat', { runId: 'r2', ttlMs: 60_000 })).toBeUndefined();
    expect((await s.tryLock('acme', 'chat', { runId: 'r1', ttlMs: 60_000 }))?.runId).toBe('r1');
  });
});
