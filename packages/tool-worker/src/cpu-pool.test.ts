import { afterEach, describe, expect, it } from 'vitest';
import type { CpuToolContext } from './define-tool.js';
import { CpuPool } from './cpu-pool.js';

const CPU_FIXTURE = new URL('../../../test/fixtures/worker-cpu-task.mjs', import.meta.url).href;
const context: CpuToolContext = {
  runId: 'run-pool',
  callId: 'call-pool',
  identity: { tenant: 'default' },
  attempt: 1,
  workerId: 'w-pool',
};

const pools: CpuPool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.destroy()));
});

function pool(threads: number): CpuPool {
  const made = new CpuPool({ threads });
  pools.push(made);
  return made;
}

describe('CpuPool', () => {
  it('starts no thread before its first CPU call, then every thread with it', async () => {
    const cpu = pool(2);
    expect(cpu.liveThreads).toBe(0);
    const out = await cpu.run(
      { module: CPU_FIXTURE, export: 'hashRounds' },
      { rounds: 1, bytes: 8 },
      context,
      new AbortController().signal,
    );
    expect(out).toMatchObject({ rounds: 1 });
    // one call ran, yet the second thread is up too: the next call (or a burst) waits for no thread to start
    expect(cpu.liveThreads).toBe(2);
  });

  it('replaces a thread it terminated at once, not with the next call', async () => {
    const cpu = pool(1);
    const hash = () =>
      cpu.run(
        { module: CPU_FIXTURE, export: 'hashRounds' },
        { rounds: 1, bytes: 8 },
        context,
        new AbortController().signal,
      );
    await hash();
    // the thread is ready: the spin goes to it at once, so aborting it terminates the thread
    const abort = new AbortController();
    const spinning = cpu.run({ module: CPU_FIXTURE, export: 'spin' }, {}, context, abort.signal);
    abort.abort(new Error('stop spinning'));
    await expect(spinning).rejects.toThrow('stop spinning');
    expect(cpu.liveThreads).toBe(1);
    expect(await hash()).toMatchObject({ rounds: 1 });
  });
});
