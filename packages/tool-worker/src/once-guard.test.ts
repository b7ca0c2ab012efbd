import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { MemoryBus, invokeTool, silentLogger, type KvBucketOptions, type KvStore } from '@agentmesh/protocol';
import { defineTool } from './define-tool.js';
import { ToolWorker } from './worker.js';

/** A bus whose tool outcome store fails its next reads or creates with `failure`, as a cluster electing a leader does. */
class FlakyStoreBus extends MemoryBus {
  failures: { get: number; create: number; error: () => Error } = {
    get: 0,
    create: 0,
    error: () => new Error('jetstream is not enabled'),
  };

  override async kv(bucket: string, options?: KvBucketOptions): Promise<KvStore> {
    const store = await super.kv(bucket, options);
    if (!bucket.endsWith('_tool_outcomes')) return store;
    const failures = this.failures;
    const get = store.get.bind(store);
    const create = store.create.bind(store);
    store.get = (key) => (failures.get-- > 0 ? Promise.reject(failures.error()) : get(key));
    store.create = (key, value) =>
      failures.create-- > 0 ? Promise.reject(failures.error()) : create(key, value);
    return store;
  }
}

async function setup() {
  const bus = new FlakyStoreBus();
  let runs = 0;
  const charge = defineTool({
    name: 'billing.charge',
    description: 'Charges (not idempotent).',
    input: z.object({ amount: z.number() }),
    idempotent: false,
    handler: ({ amount }) => {
      runs++;
      return { charged: amount };
    },
  });
  const worker = new ToolWorker({ bus, tools: [charge], register: false, logger: silentLogger() });
  await worker.start();
  const call = (id: string) =>
    invokeTool(bus, {
      call_id: id,
      run_id: 'run-1',
      tool: 'billing.charge',
      arguments: { amount: 5 },
      idempotency_key: `run-1:${id}`,
    });
  return { bus, worker, call, runs: () => runs };
}

describe('a non-idempotent call while the shared outcome store does not answer for a moment', () => {
  it('rides out failed reads and creates that never reached JetStream, and runs the call once', async () => {
    const { bus, worker, call, runs } = await setup();
    bus.failures.get = 2;
    bus.failures.create = 2;
    const outcome = await call('c1');
    expect(outcome.is_error).toBe(false);
    expect(runs()).toBe(1);
    await worker.drain();
  });

  it('does not send again a create that may have landed (a timeout), and says the store is unavailable', async () => {
    const { bus, worker, call, runs } = await setup();
    bus.failures.create = 1;
    bus.failures.error = () => new Error('TIMEOUT');
    const outcome = await call('c2');
    expect(outcome.error).toMatchObject({ code: 'unavailable' });
    expect(outcome.error?.message).toContain('shared outcome store is unavailable');
    expect(runs()).toBe(0);
    await worker.drain();
  });

  it('does not replay that refusal: the same call sent again asks the store again and runs once', async () => {
    const { bus, worker, call, runs } = await setup();
    bus.failures.create = 1;
    bus.failures.error = () => new Error('TIMEOUT');
    expect((await call('c3')).error).toMatchObject({ code: 'unavailable', retryable: true });
    const again = await call('c3');
    expect(again).toMatchObject({ is_error: false, output: { charged: 5 } });
    expect(again.replayed).toBeUndefined();
    expect(runs()).toBe(1);
    expect(await call('c3')).toMatchObject({ is_error: false, replayed: true });
    expect(runs()).toBe(1);
    await worker.drain();
  });
});
