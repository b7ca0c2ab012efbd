import { afterEach, describe, expect, it } from 'vitest';
import {
  AgentMeshError,
  ErrorCode,
  MemoryBus,
  MemoryKvStore,
  type KvBucketOptions,
  type KvStore,
  silentLogger,
  type RunEvent,
  type RunRequestInput,
  type TenantsConfig,
} from '@agentmesh/protocol';
import { Catalog } from '@agentmesh/catalog';
import { Planner } from '../planner.js';
import { submitRun } from '../infra/run-client.js';
import { TenantLedger, tenantUsageBucket } from './ledger.js';

describe('TenantLedger', () => {
  it('hands out exactly runs_per_minute slots to concurrent submitters, then says when the window reopens', async () => {
    let now = Date.UTC(2026, 0, 1, 12, 0, 45_000 / 1000);
    const kv = new MemoryKvStore();
    const ledgers = [new TenantLedger(kv, () => now), new TenantLedger(kv, () => now)];
    const slots = await Promise.all(
      Array.from({ length: 30 }, (_, i) => ledgers[i % 2]!.takeRunSlot('acme', 7)),
    );
    expect(slots.filter((s) => s.ok)).toHaveLength(7);
    const refused = slots.filter((s) => !s.ok);
    expect(refused).toHaveLength(23);
    for (const s of refused) expect(s).toMatchObject({ retryAfterMs: 15_000 });
    expect((await ledgers[0]!.takeRunSlot('other', 7)).ok).toBe(true);
    now += 15_000;
    expect((await ledgers[1]!.takeRunSlot('acme', 7)).ok).toBe(true);
  });

  it('adds usage exactly under concurrent writers, per tenant and UTC day', async () => {
    let now = Date.UTC(2026, 0, 1, 23, 59);
    const kv = new MemoryKvStore();
    const a = new TenantLedger(kv, () => now);
    const b = new TenantLedger(kv, () => now);
    await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).addUsage('acme', { tokens: 10, cost_usd: 0.25 })),
    );
    expect(await a.usageToday('acme')).toEqual({ tokens: 400, cost_usd: 10, turns: 40 });
    expect([...(await b.allUsageToday())]).toEqual([['acme', { tokens: 400, cost_usd: 10, turns: 40 }]]);
    now += 60_000;
    expect(await a.usageToday('acme')).toEqual({ tokens: 0, cost_usd: 0, turns: 0 });
  });
});

describe('TenantLedger under many concurrent runs', () => {
  it('adds the turns that end while a write is in flight in one write, per tenant', async () => {
    const kv = new MemoryKvStore();
    let writes = 0;
    const counted = Object.assign(Object.create(kv) as MemoryKvStore, {
      create: (key: string, value: Uint8Array) => (writes++, kv.create(key, value)),
      update: (key: string, value: Uint8Array, revision: number) => (
        writes++,
        kv.update(key, value, revision)
      ),
    });
    const ledger = new TenantLedger(counted);
    await Promise.all(Array.from({ length: 50 }, () => ledger.addUsage('acme', { tokens: 3 })));
    expect(await ledger.usageToday('acme')).toMatchObject({ tokens: 150, turns: 50 });
    expect(writes).toBeLessThanOrEqual(3);
  });
});

describe('embedded runs honour the tenant limits in process', () => {
  let stop: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await stop?.();
    stop = undefined;
  });

  async function embedded(tenants?: TenantsConfig): Promise<Planner> {
    const bus = new MemoryBus();
    const catalog = new Catalog({ bus, logger: silentLogger() });
    await catalog.start();
    const planner = new Planner({ bus, logger: silentLogger(), ...(tenants ? { tenants } : {}) });
    stop = async () => {
      await catalog.stop();
    };
    return planner;
  }

  const run = (id: string, tenant: string, turns = 1, tokens = 100): RunRequestInput => ({
    id,
    task: 'count',
    identity: { tenant },
    script: Array.from({ length: turns }, (_, i) =>
      i < turns - 1
        ? { text: '', usage: { input_tokens: tokens / 2, output_tokens: tokens / 2 } }
        : { text: 'done', usage: { input_tokens: tokens / 2, output_tokens: tokens / 2 } },
    ),
  });

  async function execute(planner: Planner, request: RunRequestInput) {
    const events: RunEvent[] = [];
    const final = await planner.execute(request, { onEvent: (e) => events.push(e) });
    return { final, events, modelCalls: events.filter((e) => e.type === 'llm.request').length };
  }

  it('refuses a submission beyond runs_per_minute with rate_limited and retry_after_ms', async () => {
    const planner = await embedded({ acme: { runs_per_minute: 2 } });
    expect((await execute(planner, run('r-1', 'acme'))).final).toMatchObject({ type: 'run.completed' });
    expect((await execute(planner, run('r-2', 'acme'))).final).toMatchObject({ type: 'run.completed' });
    const refused = await execute(planner, run('r-3', 'acme'));
    expect(refused.final).toMatchObject({
      type: 'run.failed',
      error: { code: 'rate_limited', retryable: true, details: { tenant: 'acme', runs_per_minute: 2 } },
    });
    const after = (refused.final as unknown as { error: { details: { retry_after_ms: number } } }).error
      .details;
    expect(after.retry_after_ms).toBeGreaterThan(0);
    expect(after.retry_after_ms).toBeLessThanOrEqual(60_000);
    expect(refused.modelCalls).toBe(0);
    expect((await execute(planner, run('r-4', 'other'))).final).toMatchObject({ type: 'run.completed' });
  });

  it('fails a run over its daily budget before any model call, and ends one that crosses it after that turn', async () => {
    const planner = await embedded({ default: { daily_tokens: 250 } });
    const first = await execute(planner, run('b-1', 'acme', 2, 100));
    expect(first.final).toMatchObject({ type: 'run.completed', status: 'done' });
    const crossing = await execute(planner, run('b-2', 'acme', 3, 100));
    expect(crossing.final).toMatchObject({ type: 'run.completed', status: 'budget_exhausted' });
    expect((crossing.final as { reason: string }).reason).toMatch(
      /tenant "acme" used its daily_tokens \(250\)/,
    );
    expect(crossing.modelCalls).toBe(1);
    const refused = await execute(planner, run('b-3', 'acme'));
    expect(refused.final).toMatchObject({
      type: 'run.failed',
      error: { code: 'budget_exhausted', details: { tenant: 'acme', daily_tokens: 250, tokens: 300 } },
    });
    expect(refused.modelCalls).toBe(0);
    expect((await execute(planner, run('b-4', 'beta'))).final).toMatchObject({ status: 'done' });
  });

  it('a fleet without tenants configured counts nothing and limits nothing', async () => {
    const planner = await embedded();
    for (let i = 0; i < 3; i++)
      expect((await execute(planner, run(`n-${i}`, 'acme', 1, 1_000_000))).final).toMatchObject({
        status: 'done',
      });
  });

  it('a submission whose limits cannot be counted is refused to its submitter, not dropped', async () => {
    class UnreachableUsage extends MemoryBus {
      override kv(bucket: string, options?: KvBucketOptions): Promise<KvStore> {
        if (bucket !== tenantUsageBucket()) return super.kv(bucket, options);
        return Promise.reject(
          new AgentMeshError(ErrorCode.Unavailable, 'the tenant usage bucket is unreachable'),
        );
      }
    }
    const bus = new UnreachableUsage();
    const catalog = new Catalog({ bus, logger: silentLogger() });
    await catalog.start();
    const planner = new Planner({ bus, logger: silentLogger(), tenants: { acme: { runs_per_minute: 5 } } });
    await planner.start();
    stop = async () => {
      await planner.drain();
      await catalog.stop();
    };
    await expect(
      submitRun(bus, { id: 'u-1', task: 'count', identity: { tenant: 'acme' }, script: [{ text: 'x' }] }),
    ).rejects.toThrow(/tenant usage bucket is unreachable/);
    const free = await submitRun(bus, { id: 'u-2', task: 'count', script: [{ text: 'x' }] });
    expect(free.run_id).toBe('u-2');
  });
});
