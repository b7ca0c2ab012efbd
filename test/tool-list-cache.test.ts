import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { MemoryBus, silentLogger, type RunEvent } from '@agentmesh/protocol';
import { Catalog } from '@agentmesh/catalog';
import { Planner } from '@agentmesh/planner';
import { ToolWorker, defineTool, mathCalcTool } from '@agentmesh/tool-worker';

const upper = defineTool({
  name: 'text.upper',
  description: 'Upper-cases a text.',
  input: z.object({ text: z.string() }),
  output: z.object({ text: z.string() }),
  idempotent: true,
  handler: ({ text }) => ({ text: text.toUpperCase() }),
});

/**
 * A planner keeps the catalog's last tool list and sends its version back; these runs check it never runs on a list
 * the catalog has moved past: a tool registered between two runs is offered to the second, one gone is not.
 */
describe('the tool list of each run follows the catalog', () => {
  let bus: MemoryBus;
  let catalog: Catalog;
  let math: ToolWorker;
  let planner: Planner;

  beforeAll(async () => {
    bus = new MemoryBus({ logger: silentLogger() });
    catalog = new Catalog({ bus, logger: silentLogger() });
    await catalog.start();
    math = new ToolWorker({ bus, tools: [mathCalcTool()], logger: silentLogger() });
    await math.start();
    await math.whenRegistered();
    planner = new Planner({ bus, logger: silentLogger(), plannerId: 'cache-planner' });
    await planner.start();
  });

  afterAll(async () => {
    await planner?.drain();
    await math?.drain();
    await catalog?.stop();
    await bus?.close();
  });

  const upperRun = async (id: string) => {
    const events: RunEvent[] = [];
    const final = await planner.execute(
      {
        id,
        task: 'shout',
        script: [{ tool_calls: [{ name: 'text.upper', arguments: { text: 'hi' } }] }, { text: 'done' }],
      },
      { onEvent: (e) => events.push(e) },
    );
    return { final, events };
  };

  it('offers a tool registered after earlier runs, and stops offering it once its worker is gone', async () => {
    for (let i = 0; i < 3; i++) {
      const run = await planner.execute({
        id: `before-${i}`,
        task: 'add',
        script: [
          { tool_calls: [{ name: 'math.calc', arguments: { lhs: 2, rhs: 3, op: 'add' } }] },
          { text: '5' },
        ],
      });
      expect(run).toMatchObject({ status: 'done', tool_calls: 1 });
    }
    const before = await upperRun('upper-before');
    expect(before.events.find((e) => e.type === 'tool.failed')).toMatchObject({ name: 'text.upper' });

    const text = new ToolWorker({ bus, tools: [upper], logger: silentLogger() });
    await text.start();
    await text.whenRegistered();
    const during = await upperRun('upper-during');
    expect(during.events.find((e) => e.type === 'tool.completed')).toMatchObject({ name: 'text.upper' });
    expect(during.events.some((e) => e.type === 'tool.failed')).toBe(false);

    await text.drain();
    const after = await upperRun('upper-after');
    expect(after.events.find((e) => e.type === 'tool.failed')).toMatchObject({ name: 'text.upper' });
  });
});
