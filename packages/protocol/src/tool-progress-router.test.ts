import { afterEach, describe, expect, it, vi } from 'vitest';
import { MemoryBus } from './bus/memory-bus.js';
import { REPLY_SECRET_LENGTH, replySecret } from './reply-secret.js';
import { ProgressRouter, type Send, type SendResult } from './tool-progress-router.js';

const send = (callId: string, lostAfterMs = 10_000): Send => ({
  subject: 'agentmesh.tool.invoke.math.calc',
  target: undefined,
  invocation: { call_id: callId, tool: 'math.calc', arguments: {}, run_id: 'r1' },
  attempt: 1,
  idempotencyKey: `r1:${callId}`,
  idempotent: true,
  remainingMs: 10_000,
  lostAfterMs,
  now: Date.now(),
  checked: false,
  signal: undefined,
  onProgress: undefined,
});

const outcome = (callId: string) => ({
  call_id: callId,
  tool: 'math.calc',
  worker_id: 'w1',
  is_error: false,
  output: 5,
  preview: '5',
  elapsed_ms: 1,
  attempts: 1,
});

describe('ProgressRouter', () => {
  let bus: MemoryBus;
  afterEach(async () => {
    await bus.close();
  });

  it("ignores progress on a guessed subject: a worker that knows one call's subject cannot reach another's", async () => {
    bus = new MemoryBus();
    const router = new ProgressRouter(bus);
    const settled: SendResult[] = [];
    const mine = router.watch(send('c1'), (r) => settled.push(r));
    const other = router.watch(send('c2'), (r) => settled.push(r));
    const at = mine.subject.lastIndexOf('.');
    const prefix = mine.subject.slice(0, at);
    const secret = mine.subject.slice(at + 1, at + 1 + REPLY_SECRET_LENGTH);
    const forged = JSON.stringify({ kind: 'started', call_id: 'c2', worker_id: 'forger', tool: 'math.calc' });
    for (let generation = 1; generation <= 2; generation++)
      for (let slot = 0; slot < 8; slot++)
        for (const token of [`${generation}_${slot}`, `${secret}${generation}_${slot}`])
          bus.publish(`${prefix}.${token}`, forged);
    await bus.flush();
    expect(other.workerId).toBeUndefined();
    bus.publish(
      other.subject,
      JSON.stringify({ kind: 'started', call_id: 'c2', worker_id: 'w1', tool: 'math.calc' }),
    );
    await bus.flush();
    expect(other.workerId).toBe('w1');
    router.unwatch(mine);
    router.unwatch(other);
    expect(settled).toEqual([]);
  });

  it('settles a call once: a reply failing after the call was taken as lost does not reach it again', () => {
    bus = new MemoryBus();
    const router = new ProgressRouter(bus);
    const settled: SendResult['kind'][] = [];
    const watch = router.watch(send('c1'), (r) => settled.push(r.kind));
    router.settle(watch, { kind: 'lost', workerId: 'w1', why: 'no heartbeat', dedup: false });
    router.settle(watch, { kind: 'outcome', outcome: outcome('c1'), sawStarted: true });
    // the same slot, watched again for another call, is settled by its own watch only
    const next = router.watch(send('c2'), (r) => settled.push(r.kind));
    router.settle(watch, { kind: 'outcome', outcome: outcome('c1'), sawStarted: true });
    router.settle(next, { kind: 'outcome', outcome: outcome('c2'), sawStarted: true });
    expect(settled).toEqual(['lost', 'outcome']);
  });

  it('finds a silent call at its deadline, and wakes for nothing before it while every call is heard from', () => {
    vi.useFakeTimers({ now: 1_000_000 });
    try {
      bus = new MemoryBus();
      const router = new ProgressRouter(bus);
      const lost: Array<[string, number]> = [];
      const start = Date.now();
      const heard = router.watch(send('heard', 3000), (r) =>
        lost.push([`heard ${r.kind}`, Date.now() - start]),
      );
      // the first wake is the first deadline, not a tick: a caller with calls running for seconds sleeps till then
      vi.advanceTimersToNextTimer();
      expect(Date.now() - start).toBeGreaterThanOrEqual(3000);
      expect(lost).toEqual([['heard lost', Date.now() - start]]);

      // a call heard from before its deadline is not lost; a later watch with a shorter limit is found at its own
      const t0 = Date.now();
      const alive = router.watch(send('alive', 1000), (r) => lost.push([`alive ${r.kind}`, Date.now() - t0]));
      vi.advanceTimersByTime(100);
      const quick = router.watch(send('quick', 200), (r) => lost.push([`quick ${r.kind}`, Date.now() - t0]));
      vi.advanceTimersByTime(800);
      alive.lastHeard = Date.now();
      vi.advanceTimersByTime(900);
      expect(lost.slice(1)).toEqual([['quick lost', 301]]);
      vi.advanceTimersByTime(200);
      expect(lost.slice(2)).toEqual([['alive lost', 1901]]);
      router.unwatch(heard);
      router.unwatch(quick);
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('draws secrets of 144 bits that do not repeat', () => {
    const secrets = new Set(Array.from({ length: 2000 }, () => replySecret()));
    expect(secrets.size).toBe(2000);
    for (const s of secrets) expect(s).toMatch(/^[A-Za-z0-9_-]{24}$/);
  });
});
