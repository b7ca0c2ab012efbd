import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { MemoryBus } from './bus/memory-bus.js';
import { AgentMeshError } from './errors.js';
import { newRequestId, requestControl } from './control-request.js';
import { respondError, respondJson } from './rpc.js';

const Reply = z.object({ ok: z.literal(true) });

describe('requestControl', () => {
  it('sends the same body again after no_responders and a lost request, and counts the attempts', async () => {
    const bus = new MemoryBus();
    const bodies: string[] = [];
    const request_id = newRequestId();
    const outcome = await requestControl(bus, 'ctl.x', { request_id }, Reply, {
      timeoutMs: 5_000,
      attemptTimeoutMs: 200,
      onRetry: (_error, attempt) => {
        if (attempt === 1) bus.subscribe('ctl.x', (msg) => void bodies.push(msg.text())); // gets it, never answers
        if (attempt === 2)
          bus.subscribe('ctl.x', (msg) => {
            bodies.push(msg.text());
            respondJson(bus, msg, { ok: true });
          });
      },
    });
    expect(outcome.attempts).toBeGreaterThanOrEqual(2);
    expect(new Set(bodies)).toEqual(new Set([JSON.stringify({ request_id })]));
  });

  it('does not send again after an answer that is an error', async () => {
    const bus = new MemoryBus();
    let seen = 0;
    bus.subscribe('ctl.y', (msg) => {
      seen++;
      respondError(bus, msg, new AgentMeshError('already_decided', 'decided by ann', { retryable: true }));
    });
    await expect(requestControl(bus, 'ctl.y', {}, Reply, { timeoutMs: 2_000 })).rejects.toMatchObject({
      code: 'already_decided',
    });
    expect(seen).toBe(1);
  });

  it('gives up at the deadline with the last failure', async () => {
    const bus = new MemoryBus();
    const started = Date.now();
    await expect(requestControl(bus, 'ctl.none', {}, Reply, { timeoutMs: 600 })).rejects.toMatchObject({
      code: 'no_responders',
    });
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});
