import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { RequestOne } from '@nats-io/nats-core/internal';
import { describe, expect, inject, it, vi } from 'vitest';
import { endAnsweredRequestsWithoutError } from './nats-answered-request.js';

const require = createRequire(import.meta.url);
/** nats-core's errors module, as its request module reads it (`errors_1.RequestError` at each use). */
const natsErrors = require(join(dirname(require.resolve('@nats-io/nats-core')), 'errors.js')) as {
  RequestError: new (message?: string, options?: ErrorOptions) => Error;
};

function fakeRequest() {
  const calls: string[] = [];
  const request = Object.create(RequestOne.prototype) as Record<string, unknown>;
  Object.assign(request, {
    timer: { cancel: () => calls.push('timer.cancel') },
    deferred: {
      resolve: (value: unknown) => calls.push(`resolve:${String(value)}`),
      reject: (error: Error) => calls.push(`reject:${error.name}:${error.message}`),
    },
    mux: { cancel: (r: unknown) => calls.push(r === request ? 'mux.cancel' : 'mux.cancel(other)') },
  });
  const resolver = (RequestOne.prototype as unknown as { resolver: (e: Error | null, m: unknown) => void })
    .resolver;
  return { calls, resolve: (err: Error | null, msg: unknown) => resolver.call(request, err, msg) };
}

/** Counts the `RequestError`s nats-core builds while `fn` runs. */
async function countRequestErrors(fn: () => Promise<void>): Promise<string[]> {
  const original = natsErrors.RequestError;
  const made: string[] = [];
  natsErrors.RequestError = class extends original {
    constructor(message?: string, options?: ErrorOptions) {
      super(message, options);
      made.push(message ?? '');
    }
  };
  try {
    await fn();
  } finally {
    natsErrors.RequestError = original;
  }
  return made;
}

describe('answered nats-core requests end without a thrown-away error', () => {
  it('recognises nats-core 3.4 and applies once', () => {
    expect(endAnsweredRequestsWithoutError()).toBe(true);
    expect(endAnsweredRequestsWithoutError()).toBe(true);
  });

  it('another copy of this module in the process finds the replacement in place', async () => {
    endAnsweredRequestsWithoutError();
    const resolver = (RequestOne.prototype as unknown as { resolver: unknown }).resolver;
    vi.resetModules();
    const copy = await import('./nats-answered-request.js');
    expect(copy.endAnsweredRequestsWithoutError).not.toBe(endAnsweredRequestsWithoutError);
    expect(copy.endAnsweredRequestsWithoutError()).toBe(true);
    expect((RequestOne.prototype as unknown as { resolver: unknown }).resolver).toBe(resolver);
  });

  it('an answer cancels the timer, resolves and leaves the mux, and rejects nothing', () => {
    endAnsweredRequestsWithoutError();
    const request = fakeRequest();
    request.resolve(null, 'the answer');
    expect(request.calls).toEqual(['timer.cancel', 'resolve:the answer', 'mux.cancel']);
  });

  it('a failure still takes nats-core path: rejected with the failure as cause, mux left', () => {
    endAnsweredRequestsWithoutError();
    const request = fakeRequest();
    request.resolve(new Error('503'), undefined);
    expect(request.calls).toContain('mux.cancel');
    expect(request.calls.filter((c) => c.startsWith('reject:'))[0]).toBe('reject:RequestError:503');
    expect(request.calls.some((c) => c.startsWith('resolve:'))).toBe(false);
  });

  it('over a real server: answers arrive, no error is built for them, failures still reject', async () => {
    endAnsweredRequestsWithoutError();
    const nc = await connect({ servers: inject('natsUrl'), noAsyncTraces: true });
    try {
      const subject = `answered.${process.pid}`;
      nc.subscribe(subject, { callback: (_e, m) => void m.respond(m.data) });
      await nc.flush();
      const answers: string[] = [];
      const made = await countRequestErrors(async () => {
        for (let i = 0; i < 20; i++)
          answers.push((await nc.request(subject, `n${i}`, { timeout: 2000 })).string());
      });
      expect(answers).toEqual(Array.from({ length: 20 }, (_, i) => `n${i}`));
      expect(made).toEqual([]);

      const failed = await countRequestErrors(async () => {
        await expect(nc.request(`${subject}.nobody`, 'x', { timeout: 2000 })).rejects.toThrow(
          /no responders/i,
        );
      });
      expect(failed.length).toBeGreaterThan(0);
      expect(nc.stats().outMsgs).toBeGreaterThanOrEqual(21);
    } finally {
      await nc.close();
    }
  });
});
