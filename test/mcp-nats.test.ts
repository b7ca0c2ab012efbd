import { mkdtempSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  CatalogGetReplySchema,
  ErrorCode,
  NatsBus,
  requestJson,
  silentLogger,
  subjects,
  type AgentMeshError,
  type RunEvent,
} from '@agentmesh/protocol';
import { Catalog } from '@agentmesh/catalog';
import { McpToolSource, ToolWorker, parseMcpConfig } from '@agentmesh/tool-worker';
import { Planner, followRun, submitRun } from '@agentmesh/planner';
import { dropPrefix, uniquePrefix } from './fixtures/llm/nats.js';
import { EVERYTHING, waitFor } from './helpers/mcp-servers.js';

const FLAKY = join(import.meta.dirname, 'fixtures', 'mcp-flaky-server.mjs');

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

describe('an MCP server that goes down and comes back, seen by the catalog and by a run', () => {
  const downFlag = join(mkdtempSync(join(tmpdir(), 'mcp-flag-')), 'down');
  const flakyPrefix = uniquePrefix('mcpf');
  const flaky = parseMcpConfig({
    servers: {
      flaky: {
        command: process.execPath,
        args: [FLAKY, 'stdio'],
        env: { MCP_DOWN_FLAG: downFlag, MCP_EVERYTHING: EVERYTHING },
        tools: { allow: ['echo'] },
        deferred: false,
      },
    },
  });
  let bus: NatsBus;
  let catalog: Catalog;
  let planner: Planner;
  let source: McpToolSource;
  let worker: ToolWorker;
  const availability: boolean[] = [];

  beforeAll(async () => {
    bus = await NatsBus.connect(natsUrl);
    catalog = new Catalog({ bus, prefix: flakyPrefix, logger: silentLogger() });
    await catalog.start();
    source = await McpToolSource.connect(flaky, {
      logger: silentLogger(),
      reconnect: { baseMs: 100, capMs: 400 },
      onAvailability: (_server, available) => availability.push(available),
    });
    worker = new ToolWorker({ bus, prefix: flakyPrefix, tools: source.tools, logger: silentLogger() });
    source.reportTo(bus, worker.workerId, flakyPrefix);
    await worker.start();
    await worker.whenRegistered();
    planner = new Planner({ bus, prefix: flakyPrefix, logger: silentLogger(), plannerId: 'planner-flaky' });
    await planner.start();
  }, 60_000);

  afterAll(async () => {
    await planner?.drain();
    await worker?.drain();
    await source?.close();
    await catalog?.stop();
    await dropPrefix(bus, flakyPrefix);
    await bus?.close();
  });

  const echoRun = async (id: string) => {
    const events: RunEvent[] = [];
    await submitRun(
      bus,
      {
        id,
        task: 'echo through the flaky server',
        provider: 'scripted',
        script: [
          { tool_calls: [{ id: 'e1', name: 'mcp.flaky.echo', arguments: { message: id } }] },
          { text: 'done' },
        ],
      },
      { prefix: flakyPrefix },
    );
    await followRun(bus, id, { prefix: flakyPrefix, onEvent: (e) => events.push(e) });
    return events;
  };
  const getEcho = () =>
    requestJson(
      bus,
      subjects(flakyPrefix).catalogGet,
      { name: 'mcp.flaky.echo' },
      CatalogGetReplySchema,
    ).then(
      () => 'available',
      (error: unknown) => (error as AgentMeshError).code,
    );

  it('marks the tools unavailable while the server is down and available again after the reconnect', async () => {
    expect(await getEcho()).toBe('available');
    writeFileSync(downFlag, 'down');
    process.kill(source.connection('flaky')?.pid as number, 'SIGKILL');
    await waitFor(() => availability.includes(false), 'the server to be reported down');
    await waitFor(async () => (await getEcho()) === ErrorCode.ToolUnavailable, 'the catalog to mark it');

    const during = await echoRun(`flaky-down-${Date.now().toString(36)}`);
    const failed = during.find((e) => e.type === 'tool.failed') as RunEvent & {
      error: { code: string; retryable: boolean };
    };
    expect(failed.error.code).toBe(ErrorCode.ToolUnavailable);
    expect(failed.error.retryable).toBe(true);

    unlinkSync(downFlag);
    await waitFor(() => availability.at(-1) === true, 'the reconnection');
    await waitFor(async () => (await getEcho()) === 'available', 'the catalog to mark it available');
    const after = await echoRun(`flaky-up-${Date.now().toString(36)}`);
    const completed = after.find((e) => e.type === 'tool.completed') as RunEvent & { preview: string };
    expect(completed.preview).toContain('Echo: flaky-up-');
    expect(after.at(-1)).toMatchObject({ type: 'run.completed', status: 'done' });
  }, 90_000);
});
