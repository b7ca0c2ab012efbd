import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Server as HttpServer } from 'node:http';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { DEFAULT_PREFIX, silentLogger } from '@agentmesh/protocol';
import { serveMcpHttp, startEmbedded, type EmbeddedMesh } from '@agentmesh/cli';
import { freePort } from './helpers/nats-server.js';
import { ToolListChangedNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { stringify } from 'yaml';
import { CLI, REPO_ROOT, cleanEnv, runAgentmesh } from './helpers/cli.js';
import { EVERYTHING } from './helpers/mcp-servers.js';

const dir = mkdtempSync(join(tmpdir(), 'mcp-serve-'));
const configFile = join(dir, 'agentmesh.yaml');
writeFileSync(
  configFile,
  stringify({
    tools: { deferred: ['crypto.*'] },
    mcp: { servers: { everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] } } },
  }),
);

const text = (result: unknown) =>
  (result as CallToolResult).content.map((c) => (c.type === 'text' ? c.text : '')).join('');

describe('agentmesh mcp serve, driven by the MCP SDK client', () => {
  let client: Client;
  const listChanged: number[] = [];

  beforeAll(async () => {
    client = new Client({ name: 'test-client', version: '1.0.0' });
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      listChanged.push(Date.now());
    });
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [CLI, 'mcp', 'serve', '--config', configFile],
      cwd: REPO_ROOT,
      env: cleanEnv() as Record<string, string>,
      stderr: 'pipe',
    });
    await client.connect(transport);
  }, 60_000);

  afterAll(async () => {
    await client?.close();
  });

  it('lists the always-exposed tools with annotations, plus tool_search, and no deferred tool', async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    expect(names).toContain('math.calc');
    expect(names).toContain('tool_search');
    expect(names).not.toContain('crypto.sha256');
    expect(names.some((n) => n.startsWith('mcp.everything.'))).toBe(false);
    const calc = tools.find((t) => t.name === 'math.calc');
    expect(calc?.inputSchema.type).toBe('object');
    expect(calc?.annotations?.readOnlyHint).toBe(true);
  });

  it('calls a listed tool on the mesh', async () => {
    const result = await client.callTool({ name: 'math.calc', arguments: { lhs: 6, rhs: 7, op: 'mul' } });
    expect(result.isError).toBeFalsy();
    expect(text(result)).toContain('42');
  });

  it('finds deferred tools (builtin and MCP) through tool_search and calls them', async () => {
    const found = await client.callTool({ name: 'tool_search', arguments: { query: 'sha256 hash' } });
    expect(text(found)).toContain('crypto.sha256');
    const sha = await client.callTool({ name: 'crypto.sha256', arguments: { text: 'abc' } });
    expect(text(sha)).toContain('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    const echoSearch = await client.callTool({ name: 'tool_search', arguments: { query: 'echo message' } });
    expect(text(echoSearch)).toContain('mcp.everything.echo');
    const echo = await client.callTool({
      name: 'mcp.everything.echo',
      arguments: { message: 'through two MCP hops' },
    });
    expect(text(echo)).toContain('Echo: through two MCP hops');
    expect(listChanged.length).toBeGreaterThan(0);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toContain('mcp.everything.echo');
  });

  it('answers bad arguments and unknown tools as tool errors', async () => {
    const bad = await client.callTool({ name: 'math.calc', arguments: { lhs: 'x' } });
    expect(bad.isError).toBe(true);
    expect(text(bad)).toMatch(/invalid_arguments/);
    const unknown = await client.callTool({ name: 'no.such_tool', arguments: {} });
    expect(unknown.isError).toBe(true);
    expect(text(unknown)).toMatch(/no\.such_tool/);
  });
});

describe('agentmesh mcp list', () => {
  it('shows each configured server, its state and tool count, and names a broken one', async () => {
    const broken = join(dir, 'broken.yaml');
    writeFileSync(
      broken,
      stringify({
        mcp: {
          servers: {
            everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
            typo: { command: '/no/such/binary' },
          },
        },
      }),
    );
    const result = await runAgentmesh(['mcp', 'list', '--config', broken], { timeoutMs: 60_000 });
    expect(result.stdout).toMatch(/everything\s+stdio\s+connected\s+1\d tools/);
    expect(result.stdout).toMatch(/typo\s+stdio\s+failed\s+0 tools/);
    expect(result.stdout).toMatch(/MCP server "typo" \(command "\/no\/such\/binary"\)/);
    expect(result.code).toBe(1);
  });

  it('refuses a bad mcp section naming the key (exit 2)', async () => {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, stringify({ mcp: { servers: { x: { comand: 'node' } } } }));
    const result = await runAgentmesh(['mcp', 'list', '--config', bad]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/mcp\.servers\.x/);
    expect(result.stderr).toMatch(/comand/);
  });
});

describe('agentmesh mcp serve --http (streamable HTTP), driven by the MCP SDK client', () => {
  let mesh: EmbeddedMesh;
  let http: HttpServer;
  let client: Client;

  beforeAll(async () => {
    mesh = await startEmbedded({ config: {}, logger: silentLogger() });
    const port = await freePort();
    http = await serveMcpHttp({ bus: mesh.bus, prefix: DEFAULT_PREFIX, logger: silentLogger(), port });
    client = new Client({ name: 'http-client', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
  });

  afterAll(async () => {
    await client?.close();
    await new Promise((r) => http?.close(r));
    await mesh?.stop();
  });

  it('lists, searches and calls over HTTP', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['math.calc', 'tool_search']));
    const result = await client.callTool({ name: 'math.calc', arguments: { lhs: 40, rhs: 2, op: 'add' } });
    expect(text(result)).toContain('42');
  });
});
