import { describe, expect, it } from 'vitest';
import { MemoryKvStore } from '@agentmesh/protocol';
import { ControlLedger } from './control-ledger.js';

describe('ControlLedger', () => {
  it('applies a request id once and answers a repeat with the first outcome', async () => {
    const ledger = new ControlLedger(new MemoryKvStore());
    let applied = 0;
    const apply = () => Promise.resolve({ seq: ++applied });
    expect(await ledger.once('run-1', 'rq-1', 'trigger', {}, apply)).toEqual({
      outcome: { seq: 1 },
      duplicate: false,
    });
    expect(await ledger.once('run-1', 'rq-1', 'trigger', {}, apply)).toEqual({
      outcome: { seq: 1 },
      duplicate: true,
    });
    expect(applied).toBe(1);
    expect(await ledger.once('run-2', 'rq-1', 'trigger', {}, apply)).toMatchObject({ duplicate: false });
  });

  it('re-applies a claim whose planner died before it finished, with the claimed values', async () => {
    const kv = new MemoryKvStore();
    const dying = new ControlLedger(kv);
    await expect(
      dying.once('run-1', 'rq-1', 'input', { input_key: 'k-1' }, () => Promise.reject(new Error('killed'))),
    ).rejects.toThrow('killed');
    const claims: unknown[] = [];
    const result = await new ControlLedger(kv).once(
      'run-1',
      'rq-1',
      'input',
      { input_key: 'k-2' },
      (claim) => {
        claims.push(claim);
        return Promise.resolve({});
      },
    );
    expect(claims).toEqual([{ input_key: 'k-1' }]);
    expect(result.duplicate).toBe(true);
  });

  it('refuses a request id used for another kind of control', async () => {
    const ledger = new ControlLedger(new MemoryKvStore());
    await ledger.once('run-1', 'rq-1', 'pause', {}, () => Promise.resolve({}));
    await expect(ledger.once('run-1', 'rq-1', 'resume', {}, () => Promise.resolve({}))).rejects.toMatchObject(
      {
        code: 'invalid_request',
        details: { kind: 'pause' },
      },
    );
  });
});

describe('ControlLedger through a NATS fault', () => {
  it('marks an applied request done through a transient failure, so a repeat does not apply it again', async () => {
    const kv = new MemoryKvStore();
    const put = kv.put.bind(kv);
    let failures = 1;
    kv.put = async (key, value) => {
      if (failures-- > 0) throw new Error('jetstream is not enabled');
      return put(key, value);
    };
    const ledger = new ControlLedger(kv);
    let applied = 0;
    const apply = () => Promise.resolve({ seq: ++applied });
    const first = await ledger.once('run-1', 'rq-1', 'trigger', {}, apply).catch((e: unknown) => e);
    const repeat = await ledger.once('run-1', 'rq-1', 'trigger', {}, apply);
    expect(first).toEqual({ outcome: { seq: 1 }, duplicate: false });
    expect(repeat).toEqual({ outcome: { seq: 1 }, duplicate: true });
    expect(applied).toBe(1);
  });
});
