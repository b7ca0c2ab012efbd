import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
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
import { CLI, REPO_ROOT, cleanEnv, runAgentmesh, startActor } from './helpers/cli.js';
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
  const TOKEN = 'test-token-0123456789abcdef0123456789abcdef';
  const workspace = mkdtempSync(join(tmpdir(), 'mcp-http-ws-'));
  let mesh: EmbeddedMesh;
  const servers: HttpServer[] = [];
  const clients: Client[] = [];

  async function serve(sideEffectTools: string[] = []): Promise<number> {
    const port = await freePort();
    servers.push(
      await serveMcpHttp({
        bus: mesh.bus,
        prefix: DEFAULT_PREFIX,
        logger: silentLogger(),
        port,
        token: TOKEN,
        sideEffectTools,
      }),
    );
    return port;
  }

  async function connect(port: number): Promise<Client> {
    const client = new Client({ name: 'http-client', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${TOKEN}` } },
      }),
    );
    clients.push(client);
    return client;
  }

  /** A JSON-RPC initialize sent by hand, with the headers a test chooses (Host included). */
  function initialize(
    port: number,
    headers: Record<string, string>,
  ): Promise<{ status: number; text: string }> {
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/mcp',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            host: `127.0.0.1:${port}`,
            ...headers,
          },
        },
        (res) => {
          let text = '';
          res.on('data', (d: Buffer) => (text += d.toString()));
          res.on('end', () => resolve({ status: res.statusCode!, text }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  beforeAll(async () => {
    mesh = await startEmbedded({ config: {}, logger: silentLogger(), workspace });
  });

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
    await mesh?.stop();
  });

  it('lists, searches and calls over HTTP with the bearer token', async () => {
    const client = await connect(await serve());
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(
      expect.arrayContaining(['math.calc', 'tool_search', 'fs.read_file']),
    );
    const result = await client.callTool({ name: 'math.calc', arguments: { lhs: 40, rhs: 2, op: 'add' } });
    expect(text(result)).toContain('42');
  });

  it('refuses a request without the bearer token, or with a wrong one (401)', async () => {
    const port = await serve();
    const missing = await initialize(port, {});
    expect(missing.status).toBe(401);
    expect(missing.text).toContain('Authorization: Bearer');
    expect((await initialize(port, { authorization: 'Bearer not-the-token' })).status).toBe(401);
    expect((await initialize(port, { authorization: `Bearer ${TOKEN}` })).status).toBe(200);
  });

  it('refuses another Host (DNS rebinding) and another Origin, even with the token', async () => {
    const port = await serve();
    const auth = { authorization: `Bearer ${TOKEN}` };
    const rebound = await initialize(port, { ...auth, host: `rebound.example:${port}` });
    expect(rebound.status).toBe(403);
    expect(rebound.text).toContain('rebound.example');
    const page = await initialize(port, { ...auth, origin: 'http://evil.example' });
    expect(page.status).toBe(403);
    expect((await initialize(port, { ...auth, host: `localhost:${port}` })).status).toBe(200);
  });

  it('offers a tool with side effects only when --allow-tools names it', async () => {
    const closed = await connect(await serve());
    expect((await closed.listTools()).tools.map((t) => t.name)).not.toContain('fs.write_file');
    const refused = await closed.callTool({
      name: 'fs.write_file',
      arguments: { path: 'refused.txt', content: 'no' },
    });
    expect(refused.isError).toBe(true);
    expect(text(refused)).toMatch(/permission_denied.*--allow-tools/);
    expect(existsSync(join(workspace, 'refused.txt'))).toBe(false);

    const open = await connect(await serve(['fs.write_file']));
    expect((await open.listTools()).tools.map((t) => t.name)).toContain('fs.write_file');
    const written = await open.callTool({
      name: 'fs.write_file',
      arguments: { path: 'allowed.txt', content: 'yes' },
    });
    expect(written.isError).toBeFalsy();
    expect(readFileSync(join(workspace, 'allowed.txt'), 'utf8')).toBe('yes');
  });
});

describe('agentmesh mcp serve --http, the command', () => {
  it('prints a new bearer token, serves with it and refuses without it', async () => {
    const serving = await startActor(['mcp', 'serve', '--http', '0'], cleanEnv(), /bearer token.*: \S+/);
    try {
      const url = /MCP server at (http:\/\/\S+)/.exec(serving.logs())![1]!;
      const token = /bearer token.*: (\S+)/.exec(serving.logs())![1]!;
      expect(token.length).toBeGreaterThanOrEqual(43);
      const refused = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      expect(refused.status).toBe(401);
      const client = new Client({ name: 'cli-http-client', version: '1.0.0' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(url), {
          requestInit: { headers: { authorization: `Bearer ${token}` } },
        }),
      );
      expect((await client.listTools()).tools.map((t) => t.name)).toContain('math.calc');
      await client.close();
    } finally {
      await serving.stop();
    }
  }, 60_000);
});
