import { afterEach, describe, expect, it } from 'vitest';
import { MemoryBus, silentLogger, type RunEvent, type RunRequestInput } from '@agentmesh/protocol';
import { Catalog } from '@agentmesh/catalog';
import { DAEMON_TIMEOUT_MS } from '../daemon/index.js';
import { Planner, type PlannerDefaults } from '../planner.js';
import { effectiveLimits } from './setup.js';

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

async function startPlanner(defaults: PlannerDefaults): Promise<Planner> {
  const bus = new MemoryBus();
  const catalog = new Catalog({ bus, logger: silentLogger() });
  await catalog.start();
  const planner = new Planner({ bus, logger: silentLogger(), plannerId: 'planner-limits', defaults });
  stop = async () => {
    await planner.drain();
    await catalog.stop();
    await bus.close();
  };
  return planner;
}

async function run(planner: Planner, request: RunRequestInput) {
  const events: RunEvent[] = [];
  const final = await planner.execute(request, { onEvent: (e) => events.push(e) });
  const started = events.find(
    (e): e is Extract<RunEvent, { type: 'run.started' }> => e.type === 'run.started',
  );
  return { final, started };
}

/** A script that never answers: every turn asks for a tool nobody offers. */
const endless = Array.from({ length: 20 }, () => ({ tool_calls: [{ name: 'nope', arguments: {} }] }));

describe("the planner's configured limits are ceilings", () => {
  const configured = {
    max_iterations: 2,
    timeout_ms: 60_000,
    tool_concurrency: 4,
    max_output_bytes: 4_096,
    max_cost_usd: 0.5,
  };

  it('a request asking for more gets the ceiling, and run.started says which limits were held', async () => {
    const planner = await startPlanner({ limits: configured });
    const { final, started } = await run(planner, {
      task: 't',
      script: endless,
      limits: {
        max_iterations: 50,
        timeout_ms: 86_400_000,
        tool_concurrency: 256,
        max_output_bytes: 16 * 1024 * 1024,
        max_cost_usd: 1_000,
      },
    });
    expect(final).toMatchObject({ status: 'budget_exhausted', iterations: 2 });
    expect(started?.limits).toMatchObject(configured);
    expect(started?.clamped).toEqual([
      { field: 'max_iterations', requested: 50, ceiling: 2 },
      { field: 'timeout_ms', requested: 86_400_000, ceiling: 60_000 },
      { field: 'max_output_bytes', requested: 16 * 1024 * 1024, ceiling: 4_096 },
      { field: 'tool_concurrency', requested: 256, ceiling: 4 },
      { field: 'max_cost_usd', requested: 1_000, ceiling: 0.5 },
    ]);
  });

  it("reports clamped limits in the schema's order, whatever the request's key order", () => {
    const asked = { tool_concurrency: 256, max_cost_usd: 1_000, max_iterations: 50 };
    const reversed = Object.fromEntries(Object.entries(asked).reverse());
    const request = (limits: typeof asked) => ({ run_id: 'r', task: 't', limits }) as never;
    const fields = ['max_iterations', 'tool_concurrency', 'max_cost_usd'];
    for (const limits of [asked, reversed as typeof asked])
      expect(effectiveLimits({ limits: configured }, request(limits)).clamped.map((c) => c.field)).toEqual(
        fields,
      );
  });

  it('a request cannot drop the configured max_cost_usd, and may lower any limit', async () => {
    const planner = await startPlanner({ limits: configured });
    const { started } = await run(planner, {
      task: 't',
      script: [{ text: 'done' }],
      limits: { max_cost_usd: undefined, max_iterations: 1, tool_concurrency: 2 },
    });
    expect(started?.limits).toMatchObject({ max_cost_usd: 0.5, max_iterations: 1, tool_concurrency: 2 });
    expect(started?.clamped).toBeUndefined();
  });

  it('with nothing configured, the shipped defaults are the ceilings', async () => {
    const planner = await startPlanner({});
    const { started } = await run(planner, {
      task: 't',
      script: [{ text: 'done' }],
      limits: { max_iterations: 10_000, tool_concurrency: 256 },
    });
    expect(started?.limits).toMatchObject({ max_iterations: 12, tool_concurrency: 16, timeout_ms: 300_000 });
  });

  it('a request setting one limit keeps the configured values of the others', async () => {
    const planner = await startPlanner({ limits: configured });
    const { final } = await run(planner, { task: 't', script: endless, limits: { max_nudges: 1 } });
    expect(final).toMatchObject({ status: 'budget_exhausted', iterations: 2 });
  });
});

describe("a daemon's lifetime", () => {
  it('is bounded by default (a day), not the longest timer Node keeps', async () => {
    const planner = await startPlanner({});
    let started: Extract<RunEvent, { type: 'run.started' }> | undefined;
    const final = planner.execute(
      { id: 'daemon-default', task: 't', daemon: {}, script: [{ text: 'idle' }] },
      {
        onEvent: (e) => {
          if (e.type !== 'run.started') return;
          started = e;
          queueMicrotask(() => planner.cancel('daemon-default', 'test over'));
        },
      },
    );
    expect(await final).toMatchObject({ status: 'cancelled' });
    expect(started?.limits?.['timeout_ms']).toBe(DAEMON_TIMEOUT_MS);
    expect(DAEMON_TIMEOUT_MS).toBeLessThanOrEqual(86_400_000);
  });

  it('is the configured daemon_timeout_ms at most, whatever the request asks', async () => {
    const planner = await startPlanner({ daemon_timeout_ms: 300 });
    const { final, started } = await run(planner, {
      task: 't',
      daemon: {},
      script: [{ text: 'idle' }],
      limits: { timeout_ms: 86_400_000 },
    });
    expect(final).toMatchObject({ status: 'timeout' });
    expect(started?.clamped).toEqual([{ field: 'timeout_ms', requested: 86_400_000, ceiling: 300 }]);
  });
});
