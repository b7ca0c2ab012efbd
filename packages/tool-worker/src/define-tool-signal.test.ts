import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from './define-tool.js';

describe('local tool calls without a signal', () => {
  it('may all listen on their signal at once without a MaxListenersExceededWarning', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => void warnings.push(w);
    process.on('warning', onWarning);
    try {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const waiter = defineTool({
        name: 'test.waiter',
        description: 'waits for the gate, listening for abort like a long-running tool',
        input: z.object({ i: z.number() }),
        output: z.object({ i: z.number() }),
        handler: async ({ i }, ctx) => {
          const onAbort = () => undefined;
          ctx.signal.addEventListener('abort', onAbort, { once: true });
          await gate;
          ctx.signal.removeEventListener('abort', onAbort);
          return { i };
        },
      });
      const calls = Array.from({ length: 30 }, (_, i) => waiter.invoke({ i }));
      release();
      expect((await Promise.all(calls)).map((r) => r.i)).toEqual(Array.from({ length: 30 }, (_, i) => i));
      await new Promise((r) => setImmediate(r));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
