import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, MemoryBus, silentLogger } from '@agentmesh/protocol';
import { McpToolSource, ToolWorker, mcpToolName, parseMcpConfig } from '@agentmesh/tool-worker';
import {
  EVERYTHING,
  FILESYSTEM,
  startHttpEverything,
  waitFor,
  type HttpEverything,
} from './helpers/mcp-servers.js';

let seq = 0;
const call = (tool: string, args: unknown) => ({
  call_id: `mcp-${++seq}`,
  run_id: 'run-mcp',
  tool,
  arguments: args,
});

describe('MCP servers as tool sources', () => {
  let http: HttpEverything;
  let source: McpToolSource;
  let bus: MemoryBus;
  let worker: ToolWorker;
  const folder = mkdtempSync(join(tmpdir(), 'mcp-fs-'));
  writeFileSync(join(folder, 'notes.txt'), 'hello from the filesystem server\n');
  const availability: [string, boolean][] = [];

  beforeAll(async () => {
    http = await startHttpEverything();
    const config = parseMcpConfig({
      servers: {
        everything: {
          command: process.execPath,
          args: [EVERYTHING, 'stdio'],
          tool_policies: { 'trigger-long-running-operation': { timeout_ms: 1500 } },
        },
        remote: { url: http.url, tools: { allow: ['echo', 'get-*'], deny: ['get-env'] }, deferred: false },
        files: { command: process.execPath, args: [FILESYSTEM, folder] },
        broken: { command: '/nonexistent/mcp-server' },
        nowhere: { url: 'http://127.0.0.1:1/mcp', connect_timeout_ms: 3000 },
        odd: {
          command: process.execPath,
          args: [join(import.meta.dirname, 'fixtures', 'mcp-odd-server.mjs')],
        },
      },
    });
    source = await McpToolSource.connect(config, {
      logger: silentLogger(),
      reconnect: { baseMs: 50, capMs: 500 },
      onAvailability: (server, available) => availability.push([server, available]),
    });
    bus = new MemoryBus({ logger: silentLogger() });
    worker = new ToolWorker({ bus, tools: source.tools, logger: silentLogger(), register: false });
    await worker.start();
  });

  afterAll(async () => {
    await worker?.drain();
    await source?.close();
    await bus?.close();
    await http?.stop();
  });

  it('names tools mcp.<server>.<tool>, canonical, with the server schema and safety hints', () => {
    const names = source.tools.map((t) => t.name);
    expect(names).toContain('mcp.everything.echo');
    expect(names).toContain('mcp.everything.get_sum');
    expect(names).toContain('mcp.files.read_text_file');
    const echo = source.tools.find((t) => t.name === 'mcp.everything.echo');
    expect(echo?.spec.loading).toBe('deferred');
    expect(echo?.spec.safety.read_only).toBe(true);
    expect(echo?.spec.input_schema['required']).toEqual(['message']);
    expect(mcpToolName('My Server', 'Get-Thing.v2')).toBe('mcp.my_server.get_thing_v2');
  });

  it('applies tools.allow / tools.deny and deferred: false', () => {
    const remote = source.tools.filter((t) => t.name.startsWith('mcp.remote.')).map((t) => t.name);
    expect(remote).toContain('mcp.remote.echo');
    expect(remote).toContain('mcp.remote.get_sum');
    expect(remote).not.toContain('mcp.remote.get_env');
    expect(remote).not.toContain('mcp.remote.trigger_long_running_operation');
    expect(source.tools.find((t) => t.name === 'mcp.remote.echo')?.spec.loading).toBe('always');
  });

  it('calls tools over stdio and streamable HTTP through the worker pipeline', async () => {
    const stdio = await worker.execute(call('mcp.everything.get_sum', { a: 2, b: 40 }));
    expect(stdio.is_error).toBe(false);
    expect(stdio.preview).toContain('42');
    const remote = await worker.execute(call('mcp.remote.echo', { message: 'over http' }));
    expect(remote.is_error).toBe(false);
    expect(remote.preview).toContain('Echo: over http');
  });

  it('returns structured content checked against the output schema', async () => {
    const tool = source.tools.find((t) => t.name === 'mcp.everything.get_structured_content');
    expect(tool?.spec.output_schema).toBeDefined();
    const outcome = await worker.execute(
      call('mcp.everything.get_structured_content', { location: 'Chicago' }),
    );
    expect(outcome.is_error).toBe(false);
    expect(outcome.preview).toMatch(/temperature/);
  });

  it('validates arguments against the JSON Schema before the server sees them', async () => {
    const outcome = await worker.execute(call('mcp.everything.get_sum', { a: 'two' }));
    expect(outcome.is_error).toBe(true);
    expect(outcome.error?.code).toBe(ErrorCode.InvalidArguments);
    expect(outcome.error?.message).toMatch(/a: must be number/);
    expect(outcome.error?.message).toMatch(/b/);
  });

  it('reads through server-filesystem and maps its isError results to tool errors', async () => {
    const ok = await worker.execute(call('mcp.files.read_text_file', { path: join(folder, 'notes.txt') }));
    expect(ok.is_error).toBe(false);
    expect(ok.preview).toContain('hello from the filesystem server');
    const denied = await worker.execute(call('mcp.files.read_text_file', { path: '/etc/hostname' }));
    expect(denied.is_error).toBe(true);
    expect(denied.error?.code).toBe(ErrorCode.ToolError);
    expect(denied.error?.message).toMatch(/access denied|outside allowed/i);
  });

  it('aborts a call past its timeout (the SDK sends the MCP cancellation)', async () => {
    const started = Date.now();
    const outcome = await worker.execute(
      call('mcp.everything.trigger_long_running_operation', { duration: 30, steps: 3 }),
    );
    expect(outcome.is_error).toBe(true);
    expect(outcome.error?.code).toBe(ErrorCode.Timeout);
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it('reports misconfigured servers by name and keeps the others', () => {
    const status = Object.fromEntries(source.status().map((s) => [s.name, s]));
    expect(status['broken']?.state).toBe('failed');
    expect(status['broken']?.problems.join(' ')).toMatch(/MCP server "broken".*\/nonexistent\/mcp-server/);
    expect(status['nowhere']?.state).toBe('failed');
    expect(status['nowhere']?.problems.join(' ')).toMatch(
      /MCP server "nowhere" at http:\/\/127\.0\.0\.1:1\/mcp/,
    );
    expect(status['everything']?.state).toBe('connected');
    expect(status['everything']?.tools).toBeGreaterThan(5);
    expect(status['files']?.state).toBe('connected');
    expect(status['odd']?.problems.join(' ')).toMatch(/MCP server "odd".*"bad".*not an object/);
    expect(status['odd']?.state).toBe('connected');
    expect(status['odd']?.tools).toBe(1);
  });

  it('reconnects a server killed mid-call: tool_unavailable meanwhile, served again after', async () => {
    const connection = source.connection('everything');
    const pid = connection?.pid;
    expect(pid).toBeGreaterThan(0);
    const inFlight = worker.execute(
      call('mcp.everything.trigger_long_running_operation', { duration: 1, steps: 1 }),
    );
    await new Promise((r) => setImmediate(r));
    process.kill(pid as number, 'SIGKILL');
    const lost = await inFlight;
    expect(lost.is_error).toBe(true);
    expect([ErrorCode.ToolUnavailable, ErrorCode.Timeout]).toContain(lost.error?.code);
    await waitFor(
      () => availability.some(([s, a]) => s === 'everything' && !a),
      'the server to be marked down',
    );
    await waitFor(() => connection?.state === 'connected', 'the reconnection');
    expect(connection?.pid).not.toBe(pid);
    expect(availability.filter(([s]) => s === 'everything')).toEqual([
      ['everything', false],
      ['everything', true],
    ]);
    const again = await worker.execute(call('mcp.everything.echo', { message: 'back' }));
    expect(again.preview).toContain('Echo: back');
  });

  it('refuses bad configuration with the key named', () => {
    expect(() => parseMcpConfig({ servers: { x: { command: 'a', url: 'http://b' } } })).toThrow(
      /servers\.x.*exactly one of "command"/,
    );
    expect(() => parseMcpConfig({ servers: { x: { command: 'a', retries: 2 } } })).toThrow(/retries/);
  });
});
