import { afterEach, describe, expect, it } from 'vitest';
import { MemoryBus } from './bus/memory-bus.js';
import { REPLY_SECRET_LENGTH, replySecret } from './reply-secret.js';
import { ProgressRouter, type Send, type SendResult } from './tool-progress-router.js';

const send = (callId: string): Send => ({
  subject: 'agentmesh.tool.invoke.math.calc',
  target: undefined,
  invocation: { call_id: callId, tool: 'math.calc', arguments: {}, run_id: 'r1' },
  attempt: 1,
  idempotencyKey: `r1:${callId}`,
  idempotent: true,
  remainingMs: 10_000,
  lostAfterMs: 10_000,
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

  it('draws secrets of 144 bits that do not repeat', () => {
    const secrets = new Set(Array.from({ length: 2000 }, () => replySecret()));
    expect(secrets.size).toBe(2000);
    for (const s of secrets) expect(s).toMatch(/^[A-Za-z0-9_-]{24}$/);
  });
});
