import { describe, expect, it } from 'vitest';
import { MemoryKvStore, type KvEntry } from '@agentmesh/protocol';
import { ApprovalStore, approvalIdFor } from './approval-store.js';

function store() {
  return new ApprovalStore(new MemoryKvStore());
}

const call = {
  run_id: 'run-1',
  call_id: 'c1',
  name: 'fs.write_file',
  args: { path: 'a' },
  summary: 'fs.write_file a',
};

describe('ApprovalStore', () => {
  it('records a pending approval under an id derived from run and call', async () => {
    const s = store();
    const record = await s.request(call);
    expect(record).toMatchObject({ state: 'pending', approval_id: approvalIdFor('run-1', 'c1') });
    expect(approvalIdFor('run-1', 'c1')).not.toBe(approvalIdFor('run-1', 'c2'));
    expect(await s.list()).toHaveLength(1);
  });

  it('asking again for the same call returns the existing record, decided or not', async () => {
    const s = store();
    const first = await s.request(call);
    await s.decide('run-1', { approval_id: first.approval_id, decision: 'approve', by: 'ann' });
    const again = await s.request(call);
    expect(again).toMatchObject({ state: 'approved', by: 'ann' });
  });

  it('a repeat of the deciding request (same request_id) is a duplicate; any other decision is already_decided', async () => {
    const s = store();
    const { approval_id } = await s.request(call);
    const decision = { approval_id, decision: 'approve', by: 'ann', request_id: 'rq-1' } as const;
    const first = await s.decide('run-1', decision);
    expect(first).toMatchObject({ state: 'approved', request_id: 'rq-1' });
    expect(first).not.toHaveProperty('duplicate');
    await expect(s.decide('run-1', decision)).resolves.toMatchObject({ state: 'approved', duplicate: true });
    expect(await s.isRepeat('run-1', decision)).toBe(true);
    for (const other of [
      { approval_id, decision: 'deny', by: 'bob', request_id: 'rq-2' },
      { approval_id, decision: 'deny', by: 'ann', request_id: 'rq-1' },
      { approval_id, decision: 'approve', by: 'ann' },
    ] as const) {
      expect(await s.isRepeat('run-1', other)).toBe(false);
      await expect(s.decide('run-1', other)).rejects.toMatchObject({
        code: 'already_decided',
        message: expect.stringContaining('already decided: approve by ann') as unknown,
        details: { decision: 'approve', by: 'ann', run_id: 'run-1' },
      });
    }
  });

  it('applies a decision once; a second one is refused with already_decided', async () => {
    const s = store();
    const { approval_id } = await s.request(call);
    await expect(
      s.decide('run-1', { approval_id, decision: 'deny', reason: 'no', by: 'bob' }),
    ).resolves.toMatchObject({ state: 'denied', reason: 'no', by: 'bob' });
    await expect(s.decide('run-1', { approval_id, decision: 'approve' })).rejects.toMatchObject({
      code: 'already_decided',
    });
    expect((await s.get('run-1', approval_id))?.state).toBe('denied');
  });

  it('of two racing decisions exactly one wins', async () => {
    const s = store();
    const { approval_id } = await s.request(call);
    const results = await Promise.allSettled([
      s.decide('run-1', { approval_id, decision: 'approve', by: 'a' }),
      s.decide('run-1', { approval_id, decision: 'deny', by: 'b' }),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(results.filter((r) => r.status === 'rejected')).toHaveLength(1);
  });

  it('an unknown approval id is not_found, and a denial never reads as approval', async () => {
    const s = store();
    await expect(s.decide('run-1', { approval_id: 'ap_nope', decision: 'approve' })).rejects.toMatchObject({
      code: 'not_found',
    });
    const { approval_id } = await s.request(call);
    const denied = await s.decide('run-1', { approval_id, decision: 'deny' });
    expect(denied.state).toBe('denied');
    expect(denied.decision).toBe('deny');
  });

  it('waitForDecision resolves on a later decision and expire denies with reason timeout', async () => {
    const s = store();
    const { approval_id } = await s.request(call);
    const waiting = s.waitForDecision('run-1', approval_id, new AbortController().signal);
    await s.decide('run-1', { approval_id, decision: 'approve', by: 'ann' });
    await expect(waiting).resolves.toMatchObject({ state: 'approved' });

    const other = await s.request({ ...call, call_id: 'c2' });
    await expect(s.expire('run-1', other.approval_id)).resolves.toMatchObject({
      state: 'denied',
      reason: 'timeout',
    });
    await expect(s.expire('run-1', approval_id)).resolves.toMatchObject({ state: 'approved' });
  });

  it('waitForDecision stops with cancelled when its signal aborts', async () => {
    const s = store();
    const { approval_id } = await s.request(call);
    const controller = new AbortController();
    const waiting = s.waitForDecision('run-1', approval_id, controller.signal);
    controller.abort();
    await expect(waiting).rejects.toMatchObject({ code: 'cancelled' });
  });

  it('waitForDecision leaves no unhandled rejection when its signal aborts while the record is being read', async () => {
    const controller = new AbortController();
    // a read that takes a turn of the event loop (a NATS round trip), during which the run is cancelled
    class SlowKv extends MemoryKvStore {
      override async get(key: string): Promise<KvEntry | null> {
        if (key.includes('.') && !controller.signal.aborted) {
          controller.abort();
          await new Promise((resolve) => setImmediate(resolve));
        }
        return super.get(key);
      }
    }
    const s = new ApprovalStore(new SlowKv());
    const { approval_id } = await s.request(call);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      await expect(s.waitForDecision('run-1', approval_id, controller.signal)).rejects.toMatchObject({
        code: 'cancelled',
      });
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    expect(unhandled).toEqual([]);
  });

  it('lists pending approvals per run or across runs', async () => {
    const s = store();
    await s.request(call);
    const b = await s.request({ ...call, run_id: 'run-2' });
    await s.decide('run-2', { approval_id: b.approval_id, decision: 'approve' });
    expect((await s.list()).map((r) => r.run_id)).toEqual(['run-1']);
    expect(await s.list({ runId: 'run-2', all: true })).toHaveLength(1);
  });
});

describe('ApprovalStore and schema_version', () => {
  it('stamps new approvals with schema_version 1 and refuses to decide one of a newer version, leaving it as is', async () => {
    const kv = new MemoryKvStore();
    const s = new ApprovalStore(kv);
    expect(await s.request(call)).toMatchObject({ schema_version: 1 });
    const id = approvalIdFor('run-2', 'c1');
    const newer = { ...call, run_id: 'run-2', approval_id: id, state: 'pending', schema_version: 2 };
    await kv.put(`run-2.${id}`, new TextEncoder().encode(JSON.stringify(newer)));
    await expect(s.decide('run-2', { approval_id: id, decision: 'approve' })).rejects.toMatchObject({
      code: 'unavailable',
      retryable: true,
      details: { schema_version: 2, supported: 1 },
    });
    expect(JSON.parse(new TextDecoder().decode((await kv.get(`run-2.${id}`))!.value))).toEqual(newer);
  });
});
