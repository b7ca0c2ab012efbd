import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CatalogGetReplySchema,
  CatalogSearchReplySchema,
  ErrorCode,
  MemoryBus,
  invokeTool,
  requestJson,
  silentLogger,
  subjects,
  type AgentMeshError,
} from '@agentmesh/protocol';
import { Catalog } from '@agentmesh/catalog';
import { McpToolSource, ToolWorker, parseMcpConfig } from '@agentmesh/tool-worker';
import { waitFor } from './helpers/mcp-servers.js';

const CHANGING = join(import.meta.dirname, 'fixtures', 'mcp-changing-server.mjs');

describe('an MCP server that changes its tool list while the worker runs', () => {
  let bus: MemoryBus;
  let catalog: Catalog;
  let source: McpToolSource;
  let worker: ToolWorker;
  let seq = 0;
  const call = (tool: string, args: unknown = {}) =>
    invokeTool(
      bus,
      { call_id: `lc-${++seq}`, run_id: 'run-lc', tool, arguments: args },
      { timeoutMs: 20_000 },
    );
  const search = async (query: string) =>
    (
      await requestJson(bus, subjects().catalogSearch, { query, limit: 20 }, CatalogSearchReplySchema)
    ).results.map((r) => r.name);
  const catalogState = (name: string) =>
    requestJson(bus, subjects().catalogGet, { name }, CatalogGetReplySchema).then(
      () => 'served',
      (error: unknown) => (error as AgentMeshError).code,
    );

  beforeAll(async () => {
    bus = new MemoryBus({ logger: silentLogger() });
    catalog = new Catalog({ bus, logger: silentLogger() });
    await catalog.start();
    const config = parseMcpConfig({
      servers: { changing: { command: process.execPath, args: [CHANGING] } },
    });
    source = await McpToolSource.connect(config, { logger: silentLogger() });
    worker = new ToolWorker({ bus, tools: source.tools, logger: silentLogger(), heartbeatMs: 200 });
    source.keepInSync(worker);
    await worker.start();
    await worker.whenRegistered();
  }, 60_000);

  afterAll(async () => {
    await worker?.drain();
    await source?.close();
    await catalog?.stop();
    await bus?.close();
  });

  it('serves a tool the server added, and stops serving the ones it removed, without a restart', async () => {
    expect(worker.specs.map((s) => s.name).sort()).toEqual([
      'mcp.changing.ephemeral',
      'mcp.changing.grow',
      'mcp.changing.shrink',
    ]);
    expect(await catalogState('mcp.changing.shout')).toBe(ErrorCode.NotFound);
    expect((await call('mcp.changing.ephemeral')).is_error).toBe(false);

    expect((await call('mcp.changing.grow')).is_error).toBe(false);
    await waitFor(
      async () => (await catalogState('mcp.changing.shout')) === 'served',
      'shout in the catalog',
    );
    expect(await search('shout capital letters')).toContain('mcp.changing.shout');
    const shouted = await call('mcp.changing.shout', { message: 'hello' });
    expect(shouted.is_error).toBe(false);
    expect(shouted.output).toBe('HELLO');
    const invalid = await call('mcp.changing.shout', { message: 42 });
    expect(invalid.error?.code).toBe(ErrorCode.InvalidArguments);

    expect((await call('mcp.changing.shrink')).is_error).toBe(false);
    await waitFor(async () => (await catalogState('mcp.changing.shout')) !== 'served', 'shout to leave');
    expect(await catalogState('mcp.changing.shout')).toBe(ErrorCode.NotFound);
    expect(await catalogState('mcp.changing.ephemeral')).toBe(ErrorCode.NotFound);
    expect(await search('shout capital letters')).not.toContain('mcp.changing.shout');
    expect(worker.specs.map((s) => s.name)).not.toContain('mcp.changing.ephemeral');
    const gone = await worker.execute({
      call_id: 'lc-gone',
      run_id: 'run-lc',
      tool: 'mcp.changing.shout',
      arguments: { message: 'x' },
    });
    expect(gone.error?.code).toBe(ErrorCode.UnknownTool);
    expect(gone.error?.message).toContain('mcp.changing.shout');
    await expect(call('mcp.changing.ephemeral')).rejects.toMatchObject({ code: ErrorCode.NoResponders });
  }, 60_000);

  it('adds a tool back when the server lists it again', async () => {
    expect((await call('mcp.changing.grow')).is_error).toBe(false);
    await waitFor(async () => (await catalogState('mcp.changing.shout')) === 'served', 'shout back');
    expect((await call('mcp.changing.shout', { message: 'again' })).output).toBe('AGAIN');
  }, 60_000);
});
