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

async function submit(body: unknown): Promise<Response> {
  return fetch(`${server.url}/api/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
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
      ((await (await fetch(`${server.url}/api/runs${query}`)).json()) as { runs: RunSummary[] }).runs.map(
        (r) => r.run_id,
      );
    expect(await list('?tenant=acme')).toEqual(['run-console-a']);
    expect(await list('?session=s1&status=done')).toEqual(['run-console-a']);
    expect(await list('?status=failed')).toEqual([]);
    expect((await list('?q=console-b'))[0]).toBe('run-console-b');
    const run = (await (await fetch(`${server.url}/api/runs/run-console-a`)).json()) as {
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
    const notJson = await fetch(`${server.url}/api/runs`, { method: 'POST', body: '{' });
    expect(notJson.status).toBe(400);
    expect(await notJson.text()).toContain('not JSON');
    expect((await fetch(`${server.url}/api/runs/run-nobody-knows`)).status).toBe(404);
    expect((await fetch(`${server.url}/api/nothing`)).status).toBe(404);
    expect((await fetch(`${server.url}/../../package.json`)).status).not.toBe(200);
  });

  it('serves the app, the tools with their exposure, search results, and the fleet with its load', async () => {
    const page = await fetch(`${server.url}/#/runs`);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(await page.text()).toContain('<script type="module" src="/app.js">');
    expect((await fetch(`${server.url}/pages/run.js`)).headers.get('content-type')).toContain('javascript');
    const tools = (await (await fetch(`${server.url}/api/tools`)).json()) as {
      tools: { name: string; loading: string; workers: number }[];
    };
    expect(tools.tools.find((t) => t.name === 'math.calc')).toMatchObject({ loading: 'always', workers: 1 });
    const found = (await (await fetch(`${server.url}/api/tools?q=sha256`)).json()) as {
      tools: { name: string }[];
    };
    expect(found.tools[0]!.name).toBe('crypto.sha256');
    const fleet = (await (await fetch(`${server.url}/api/fleet`)).json()) as {
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
    const cancel = await fetch(`${server.url}/api/runs/run-console-slow/cancel`, { method: 'POST' });
    expect(await cancel.json()).toEqual({ run_id: 'run-console-slow', cancelled: true });
    expect((await reached('run-console-slow', 'cancelled')).status).toBe('cancelled');
  });
});
