import { describe, expect, it } from 'vitest';
import { AgentMeshError, ErrorCode } from './errors.js';
import { backoffDelay, isClosedFailure, isTransientFailure, isUnsentFailure, retry } from './retry.js';
import { ClosedConnectionError } from '@nats-io/nats-core';
import { closedError } from './bus/shared.js';

describe('backoffDelay', () => {
  it('doubles from the base up to the cap, jitter within its fraction', () => {
    const mid = () => 0.5;
    expect([1, 2, 3, 4, 5, 6].map((a) => backoffDelay(a, { baseMs: 100, capMs: 1_000 }, mid))).toEqual([
      100, 200, 400, 800, 1_000, 1_000,
    ]);
    expect(backoffDelay(1, { baseMs: 100, jitter: 0.5 }, () => 0)).toBe(50);
    expect(backoffDelay(1, { baseMs: 100, jitter: 0.5 }, () => 1)).toBe(150);
    expect(backoffDelay(10, { baseMs: 100, capMs: 500, jitter: 1 }, () => 1)).toBe(500);
  });
});

describe('retry', () => {
  const transient = () => new AgentMeshError(ErrorCode.Unavailable, 'down for a moment');

  it('retries retryable failures and returns the first success', async () => {
    let calls = 0;
    const value = await retry(
      async (attempt) => {
        calls++;
        if (attempt < 3) throw transient();
        return 'ok';
      },
      { baseMs: 1, capMs: 2 },
    );
    expect(value).toBe('ok');
    expect(calls).toBe(3);
  });

  it('throws a failure that is not retryable at once', async () => {
    let calls = 0;
    const error = await retry(
      async () => {
        calls++;
        throw new AgentMeshError(ErrorCode.InvalidArguments, 'bad');
      },
      { baseMs: 1 },
    ).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'invalid_arguments' });
    expect(calls).toBe(1);
  });

  it('stops after `attempts` and throws the last failure', async () => {
    let calls = 0;
    const error = await retry(
      async () => {
        calls++;
        throw transient();
      },
      { attempts: 4, baseMs: 1, capMs: 1 },
    ).catch((e: unknown) => e);
    expect(calls).toBe(4);
    expect(error).toMatchObject({ code: 'unavailable' });
  });

  it('never waits past the deadline', async () => {
    const started = Date.now();
    await expect(
      retry(
        async () => {
          throw transient();
        },
        { timeoutMs: 60, baseMs: 1_000, capMs: 1_000 },
      ),
    ).rejects.toMatchObject({ code: 'unavailable' });
    expect(Date.now() - started).toBeLessThan(500);
  });

  it('honours a delay the failure asks for', async () => {
    const started = Date.now();
    let calls = 0;
    await retry(
      async () => {
        if (++calls === 1)
          throw new AgentMeshError(ErrorCode.Busy, 'slow down', { details: { retry_after_ms: 80 } });
        return calls;
      },
      { baseMs: 1, delayHint: (e) => e.details?.['retry_after_ms'] as number | undefined },
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(75);
  });

  it('an abort ends a pending wait with `cancelled`', async () => {
    const controller = new AbortController();
    const pending = retry(
      async () => {
        throw transient();
      },
      { baseMs: 10_000, capMs: 10_000, signal: controller.signal },
    );
    setImmediate(() => controller.abort('stop'));
    await expect(pending).rejects.toMatchObject({ code: 'cancelled' });
  });

  it('uses the caller’s classification when given', async () => {
    let calls = 0;
    await expect(
      retry(
        async () => {
          calls++;
          throw transient();
        },
        { baseMs: 1, retryable: (_e, attempt) => attempt < 2 },
      ),
    ).rejects.toMatchObject({ code: 'unavailable' });
    expect(calls).toBe(2);
  });

  it('spends each delay through `wait`, which may end it early; an abort during it is `cancelled`', async () => {
    const waits: [number, string][] = [];
    let calls = 0;
    const result = await retry(
      async () => {
        if (++calls < 3) throw transient();
        return calls;
      },
      {
        baseMs: 10_000,
        capMs: 10_000,
        jitter: 0,
        wait: async (delayMs, error) => void waits.push([delayMs, error.code]),
      },
    );
    expect(result).toBe(3);
    expect(waits).toEqual([
      [10_000, 'unavailable'],
      [10_000, 'unavailable'],
    ]);

    const controller = new AbortController();
    const pending = retry(
      async () => {
        throw transient();
      },
      { baseMs: 1, signal: controller.signal, wait: async () => controller.abort('stop') },
    );
    await expect(pending).rejects.toMatchObject({ code: 'cancelled' });
  });
});

describe('isTransientFailure', () => {
  it('is true for what NATS throws while a node restarts, and for retryable errors', () => {
    for (const message of [
      'timeout',
      'no responders',
      '503',
      'jetstream is not enabled',
      'CONNECTION_CLOSED',
    ])
      expect(isTransientFailure(new Error(message)), message).toBe(message !== 'CONNECTION_CLOSED');
    expect(isTransientFailure(new Error('connection closed'))).toBe(true);
    expect(isTransientFailure(AgentMeshError.from(new Error('timeout')))).toBe(true);
    expect(isTransientFailure(new AgentMeshError(ErrorCode.Unavailable, 'x', { retryable: true }))).toBe(
      true,
    );
  });

  it('is false for other failures, and for a non-retryable error of a known code', () => {
    expect(isTransientFailure(new Error('trigger record is corrupt'))).toBe(false);
    expect(isTransientFailure(new AgentMeshError(ErrorCode.InvalidRequest, 'timeout must be a number'))).toBe(
      false,
    );
  });
});

describe('isUnsentFailure', () => {
  it('is true only for a request no server took, read from the error or its cause; a timeout may have landed', () => {
    for (const message of ['no responders', '503', 'jetstream is not enabled'])
      expect(isUnsentFailure(new Error(message)), message).toBe(true);
    for (const message of ['timeout', 'TIMEOUT', 'connection closed', 'wrong last sequence'])
      expect(isUnsentFailure(new Error(message)), message).toBe(false);
    expect(isUnsentFailure(AgentMeshError.from(new Error('jetstream is not enabled')))).toBe(true);
    expect(isUnsentFailure(new Error('store failed', { cause: new Error('503') }))).toBe(true);
    expect(isUnsentFailure('no responders')).toBe(false);
  });
});

describe('isClosedFailure', () => {
  it('stops a retry that would retry anything at its first failure through a closed client', async () => {
    for (const failure of [
      new ClosedConnectionError(),
      closedError(),
      AgentMeshError.from(new ClosedConnectionError()),
    ]) {
      let attempts = 0;
      const started = Date.now();
      const outcome = retry(
        () => {
          attempts++;
          return Promise.reject(failure);
        },
        { timeoutMs: 30_000, baseMs: 1_000, retryable: () => true },
      );
      await expect(outcome).rejects.toMatchObject({ message: failure.message });
      expect(attempts).toBe(1);
      expect(Date.now() - started).toBeLessThan(1_000);
    }
  });

  it('reads the error and its causes, and is false for a connection that may come back', () => {
    expect(isClosedFailure(new ClosedConnectionError())).toBe(true);
    expect(isClosedFailure(closedError())).toBe(true);
    expect(
      isClosedFailure(
        new AgentMeshError(ErrorCode.Unavailable, 'write failed', { cause: new ClosedConnectionError() }),
      ),
    ).toBe(true);
    expect(isClosedFailure(new Error('disconnect'))).toBe(false);
    expect(isClosedFailure(new Error('connection closed'))).toBe(false);
    expect(
      isClosedFailure(new AgentMeshError(ErrorCode.Unavailable, 'no responders', { retryable: true })),
    ).toBe(false);
    expect(isClosedFailure('closed connection')).toBe(false);
  });
});
