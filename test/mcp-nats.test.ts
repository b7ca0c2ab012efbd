import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { NatsBus, silentLogger, type RunEvent } from '@agentmesh/protocol';
import { Catalog } from '@agentmesh/catalog';
import { McpToolSource, ToolWorker, parseMcpConfig } from '@agentmesh/tool-worker';
import { Planner, followRun, submitRun } from '@agentmesh/planner';
import { dropPrefix, uniquePrefix } from './fixtures/llm/nats.js';
import { EVERYTHING } from './helpers/mcp-servers.js';

const natsUrl = inject('natsUrl');
const prefix = uniquePrefix('mcpn');
const config = parseMcpConfig({
  servers: { everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] } },
});

describe('an MCP tool in a run over NATS, shared by two worker replicas', () => {
  let bus: NatsBus;
  let catalog: Catalog;
  let planner: Planner;
  const replicas: { source: McpToolSource; worker: ToolWorker }[] = [];

  beforeAll(async () => {
    bus = await NatsBus.connect(natsUrl);
    catalog = new Catalog({ bus, prefix, logger: silentLogger() });
    await catalog.start();
    for (const id of ['replica-a', 'replica-b']) {
      const source = await McpToolSource.connect(config, { logger: silentLogger() });
      const worker = new ToolWorker({
        bus,
        prefix,
        tools: source.tools,
        workerId: id,
        logger: silentLogger(),
      });
      await worker.start();
      await worker.whenRegistered();
      replicas.push({ source, worker });
    }
    planner = new Planner({ bus, prefix, logger: silentLogger(), plannerId: 'planner-mcp' });
    await planner.start();
  }, 60_000);

  afterAll(async () => {
    await planner?.drain();
    for (const { worker, source } of replicas) {
      await worker.drain();
      await source.close();
    }
    await catalog?.stop();
    await dropPrefix(bus, prefix);
    await bus?.close();
  });

  it('finds mcp.everything.get_sum with tool_search and spreads its calls over both replicas', async () => {
    const calls = Array.from({ length: 16 }, (_, i) => ({
      id: `sum-${i}`,
      name: 'mcp.everything.get_sum',
      arguments: { a: i, b: 1000 },
    }));
    const events: RunEvent[] = [];
    const runId = `mcp-run-${Date.now().toString(36)}`;
    await submitRun(
      bus,
      {
        id: runId,
        task: 'add numbers with the MCP tool',
        provider: 'scripted',
        script: [
          { tool_calls: [{ id: 's1', name: 'tool_search', arguments: { query: 'sum of two numbers' } }] },
          { tool_calls: calls },
          { text: 'all sums done' },
        ],
      },
      { prefix },
    );
    const final = await followRun(bus, runId, { prefix, onEvent: (e) => events.push(e) });
    expect(final).toMatchObject({ type: 'run.completed', status: 'done' });
    const search = events.find((e) => e.type === 'tool.search') as RunEvent & { results: string[] };
    expect(search.results).toContain('mcp.everything.get_sum');
    const completed = events.filter((e) => e.type === 'tool.completed') as (RunEvent & {
      name: string;
      worker_id: string;
      preview: string;
      is_error: boolean;
    })[];
    const sums = completed.filter((e) => e.name === 'mcp.everything.get_sum');
    expect(sums).toHaveLength(16);
    expect(sums.every((e) => !e.is_error)).toBe(true);
    expect(sums.map((e) => e.preview).join(' ')).toContain('1015');
    expect(new Set(sums.map((e) => e.worker_id))).toEqual(new Set(['replica-a', 'replica-b']));
  }, 60_000);
});
