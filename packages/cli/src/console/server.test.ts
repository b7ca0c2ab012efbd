import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PREFIX, silentLogger } from '@agentmesh/protocol';
import { startEmbedded, type EmbeddedMesh } from '../embedded.js';
import { RunIndex, type RunSummary } from './run-index.js';
import { startConsoleServer, type ConsoleServer } from './server.js';

let mesh: EmbeddedMesh;
let index: RunIndex;
let server: ConsoleServer;

const script = [
  { text: 'adding', tool_calls: [{ name: 'math.calc', arguments: { lhs: 2, rhs: 3, op: 'add' } }] },
  { text: '2 + 3 = 5' },
];

beforeAll(async () => {
  mesh = await startEmbedded({ config: {}, logger: silentLogger() });
  index = new RunIndex(mesh.bus, DEFAULT_PREFIX, silentLogger());
  await index.start();
  server = await startConsoleServer({
    bus: mesh.bus,
    prefix: DEFAULT_PREFIX,
    index,
    logger: silentLogger(),
    port: 0,
    defaultScript: script,
    fleet: () =>
      Promise.resolve([
        { name: 'agentmesh-tool-worker', id: mesh.worker.workerId, version: '0.1.0', metadata: {} },
        { name: 'agentmesh-planner', id: mesh.planner.id, version: '0.1.0', metadata: {} },
      ]),
  });
});

afterAll(async () => {
  await server.close();
  index.stop();
  await mesh.stop();
});

/** `fetch` on the console with its token, as the page (through its cookie) or a script would send it. */
function api(path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(`${server.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${server.token}`, ...(init.headers as Record<string, string>) },
  });
}

async function submit(body: unknown): Promise<Response> {
  return api('/api/runs', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

/** A raw HTTP request: unlike fetch, it may set any `Host`. */
function raw(
  method: string,
  path: string,
  headers: Record<string, string>,
  body = '',
): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  const { port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Resolves with the run's summary once the index saw it reach `status`. */
function reached(runId: string, status: string): Promise<RunSummary> {
  return new Promise((resolve) => {
    const check = (s: RunSummary) => {
      if (s.run_id !== runId || s.status !== status) return;
      off();
      resolve(s);
    };
    const off = index.onUpdate(check);
    const known = index.list({ q: runId })[0];
    if (known) check(known);
  });
}

describe('console server, embedded', () => {
  it('submits runs, lists them with filters, and shows one with its events', async () => {
    const a = await submit({ id: 'run-console-a', task: 'add', identity: { tenant: 'acme', session: 's1' } });
    expect(a.status).toBe(202);
    await submit({ id: 'run-console-b', task: 'add', identity: { tenant: 'other' } });
    await reached('run-console-a', 'done');
    await reached('run-console-b', 'done');
    const list = async (query: string) =>
      ((await (await api(`/api/runs${query}`)).json()) as { runs: RunSummary[] }).runs.map((r) => r.run_id);
    expect(await list('?tenant=acme')).toEqual(['run-console-a']);
    expect(await list('?session=s1&status=done')).toEqual(['run-console-a']);
    expect(await list('?status=failed')).toEqual([]);
    expect((await list('?q=console-b'))[0]).toBe('run-console-b');
    const run = (await (await api('/api/runs/run-console-a')).json()) as {
      summary: RunSummary;
      events: { type: string; seq: number }[];
    };
    expect(run.summary).toMatchObject({ status: 'done', tenant: 'acme', tool_calls: 1, iterations: 2 });
    expect(run.events.map((e) => e.seq)).toEqual(run.events.map((_, i) => i + 1));
    expect(run.events.at(-1)!.type).toBe('run.completed');
  });

  it('answers bad input with a status and a message that names the problem', async () => {
    const empty = await submit({ task: '' });
    expect(empty.status).toBe(400);
    expect(await empty.text()).toMatch(/task/);
    const notObject = await submit([1, 2]);
    expect(notObject.status).toBe(400);
    const notJson = await api('/api/runs', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{',
    });
    expect(notJson.status).toBe(400);
    expect(await notJson.text()).toContain('not JSON');
    expect((await api('/api/runs/run-nobody-knows')).status).toBe(404);
    expect((await api('/api/nothing')).status).toBe(404);
    expect((await fetch(`${server.url}/../../package.json`)).status).not.toBe(200);
  });

  it('serves the app, the tools with their exposure, search results, and the fleet with its load', async () => {
    const page = await fetch(`${server.url}/#/runs`);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(await page.text()).toContain('<script type="module" src="/app.js">');
    expect((await fetch(`${server.url}/pages/run.js`)).headers.get('content-type')).toContain('javascript');
    const tools = (await (await api('/api/tools')).json()) as {
      tools: { name: string; loading: string; workers: number }[];
    };
    expect(tools.tools.find((t) => t.name === 'math.calc')).toMatchObject({ loading: 'always', workers: 1 });
    const found = (await (await api('/api/tools?q=sha256')).json()) as {
      tools: { name: string }[];
    };
    expect(found.tools[0]!.name).toBe('crypto.sha256');
    const fleet = (await (await api('/api/fleet')).json()) as {
      actors: { name: string; load: { total: number; unit: string } }[];
    };
    const worker = fleet.actors.find((a) => a.name === 'agentmesh-tool-worker')!;
    expect(worker.load.unit).toBe('tool calls');
    expect(worker.load.total).toBeGreaterThanOrEqual(2);
    expect(fleet.actors.find((a) => a.name === 'agentmesh-planner')!.load.total).toBeGreaterThanOrEqual(2);
  });

  it('cancels a running run on the in-process bus', async () => {
    const res = await submit({
      id: 'run-console-slow',
      task: 'wait',
      script: [{ text: 'thinking', delay_ms: 60_000 }, { text: 'never' }],
    });
    expect(res.status).toBe(202);
    await reached('run-console-slow', 'running');
    const cancel = await api('/api/runs/run-console-slow/cancel', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
    });
    expect(await cancel.json()).toEqual({ run_id: 'run-console-slow', cancelled: true });
    expect((await reached('run-console-slow', 'cancelled')).status).toBe('cancelled');
  });
});

describe('console server, what another web page can send', () => {
  const runs = () => index.list().map((r) => r.run_id);

  it('refuses a cross-origin text/plain POST (a no-cors fetch from any page) and starts no run', async () => {
    const host = new URL(server.url).host;
    const forged = await raw(
      'POST',
      '/api/runs',
      { host, origin: 'http://evil.example', 'content-type': 'text/plain' },
      JSON.stringify({ id: 'run-forged', task: 'add' }),
    );
    expect(forged.status).toBe(403);
    expect(JSON.parse(forged.text)).toMatchObject({ error: { code: 'permission_denied' } });
    expect(forged.text).toContain('evil.example');
    const noToken = await raw(
      'POST',
      '/api/runs',
      { host, 'content-type': 'text/plain' },
      JSON.stringify({ id: 'run-forged', task: 'add' }),
    );
    expect(noToken.status).toBe(401);
    const cancelled = await raw('POST', '/api/runs/run-console-a/cancel', {
      host,
      origin: 'http://evil.example',
    });
    expect(cancelled.status).toBe(403);
    expect(runs()).not.toContain('run-forged');
  });

  it('refuses a state change that is not JSON, even with the token (415, named)', async () => {
    const res = await api('/api/runs', {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: JSON.stringify({ id: 'run-plain', task: 'add' }),
    });
    expect(res.status).toBe(415);
    expect(await res.json()).toMatchObject({
      error: { code: 'invalid_request', message: expect.stringContaining('application/json') },
    });
    expect(runs()).not.toContain('run-plain');
  });

  it('refuses another Host on every request, GET included (DNS rebinding)', async () => {
    const headers = {
      host: `rebound.example:${new URL(server.url).port}`,
      authorization: `Bearer ${server.token}`,
    };
    const list = await raw('GET', '/api/runs', headers);
    expect(list.status).toBe(421);
    expect(list.text).toContain('rebound.example');
    expect(list.text).not.toContain('run-console-a');
    expect((await raw('GET', '/', headers)).status).toBe(421);
    const local = await raw('GET', '/api/runs', {
      ...headers,
      host: `localhost:${new URL(server.url).port}`,
    });
    expect(local.status).toBe(200);
  });

  it('refuses the API without the token or with a wrong one; the printed link hands it over as a cookie', async () => {
    expect((await fetch(`${server.url}/api/runs`)).status).toBe(401);
    const wrong = await fetch(`${server.url}/api/runs`, { headers: { authorization: 'Bearer nope' } });
    expect(wrong.status).toBe(401);
    expect(server.link).toBe(`${server.url}/?token=${server.token}`);
    expect(server.token.length).toBeGreaterThanOrEqual(43);
    expect((await fetch(`${server.url}/?token=nope`, { redirect: 'manual' })).status).toBe(401);
    const opened = await fetch(server.link, { redirect: 'manual' });
    expect(opened.status).toBe(303);
    expect(opened.headers.get('location')).toBe('/');
    const cookie = opened.headers.get('set-cookie')!;
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);
    const withCookie = await fetch(`${server.url}/api/runs`, { headers: { cookie: cookie.split(';')[0]! } });
    expect(withCookie.status).toBe(200);
  });
});
