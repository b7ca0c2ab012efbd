import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunEventSchema, type RunEvent } from '@agentmesh/protocol';
import { startNatsServer, type NatsServerHandle } from './helpers/nats-server.js';
import { cleanEnv, runAgentmesh, startActor, type ActorProcess } from './helpers/cli.js';

function parseEvents(stdout: string): RunEvent[] {
  return stdout
    .trim()
    .split('\n')
    .map((line) => RunEventSchema.parse(JSON.parse(line)));
}

function expectAddRun(events: RunEvent[]) {
  const types = events.map((e) => e.type);
  expect(types[0]).toBe('run.accepted');
  expect(types.at(-1)).toBe('run.completed');
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  expect(new Set(events.map((e) => e.run_id)).size).toBe(1);
  const completed = events.find((e) => e.type === 'tool.completed');
  expect(completed).toMatchObject({ name: 'math.calc', is_error: false });
  expect(completed?.type === 'tool.completed' && completed.preview).toContain('5');
  const started = events.find((e) => e.type === 'tool.started');
  expect(started?.type === 'tool.started' && started.worker_id).toBeTruthy();
  const final = events.at(-1)!;
  expect(final).toMatchObject({ type: 'run.completed', status: 'done', iterations: 2, tool_calls: 1 });
  // the planner fed the tool result back: the second model turn saw it
  const secondRequest = events.filter((e) => e.type === 'llm.request')[1];
  expect(secondRequest).toBeDefined();
}

describe('agentmesh run, embedded', () => {
  it('runs the README example with the scripted provider and prints the contract events with --json', async () => {
    const r = await runAgentmesh(['run', '--script', 'examples/add.json', '--json', 'add 2 and 3']);
    expect(r.stderr).not.toMatch(/error/i);
    expect(r.code).toBe(0);
    expectAddRun(parseEvents(r.stdout));
  });

  it('shows live progress for people: turns, tool calls, results, the answer', async () => {
    const r = await runAgentmesh(['run', '--script', 'examples/add.json', 'add 2 and 3']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/turn 1/);
    expect(r.stdout).toMatch(/math\.calc/);
    expect(r.stdout).toMatch(/✓ math\.calc .*5/);
    expect(r.stdout).toMatch(/done/);
    expect(r.stdout).toMatch(/2 \+ 3 = 5/);
  });

  it('exits 2 and says how to configure a provider when there is neither a key nor a script', async () => {
    const r = await runAgentmesh(['run', 'add 2 and 3']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/OPENAI_API_KEY/);
    expect(r.stderr).toMatch(/--script/);
  });

  it.each([
    [['run', '--bogus', 'x'], /bogus/],
    [['run', '--script', 'examples/add.json'], /needs a task/],
    [['run', '--script', '/nonexistent.json', 'x'], /cannot read script/],
    [['frobnicate'], /unknown command "frobnicate"/],
    [['run', '--script', 'examples/add.json', '--max-iterations', 'many', 'x'], /--max-iterations must be/],
  ])('exits 2 with a clear message for %j', async (args, pattern) => {
    const r = await runAgentmesh(args);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(pattern);
  });

  it('exits 2 naming the key of a bad configuration file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentmesh-cli-'));
    writeFileSync(join(dir, 'bad.yaml'), 'limits: { max_iterations: -3 }\n');
    const r = await runAgentmesh([
      'run',
      '--config',
      join(dir, 'bad.yaml'),
      '--script',
      'examples/add.json',
      'x',
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/limits\.max_iterations/);
  });

  it('exits 1 when the run does not finish done (iteration budget)', async () => {
    const r = await runAgentmesh([
      'run',
      '--script',
      'examples/add.json',
      '--max-iterations',
      '1',
      '--json',
      'add',
    ]);
    expect(r.code).toBe(1);
    const final = parseEvents(r.stdout).at(-1);
    expect(final).toMatchObject({ type: 'run.completed', status: 'budget_exhausted' });
  });

  it('--max-iterations above the shipped default is not clamped: the embedded planner takes it as its ceiling', async () => {
    const r = await runAgentmesh([
      'run',
      '--script',
      'examples/add.json',
      '--max-iterations',
      '40',
      '--json',
      'add',
    ]);
    const started = parseEvents(r.stdout).find((e) => e.type === 'run.started');
    expect(started).toMatchObject({ limits: { max_iterations: 40 } });
    expect(started).not.toHaveProperty('clamped');
  });
});

describe('agentmesh run --nats, with catalog, planner and worker as separate processes', () => {
  let nats: NatsServerHandle;
  const actors: ActorProcess[] = [];
  beforeAll(async () => {
    nats = await startNatsServer();
    const env = cleanEnv({ NATS_URL: nats.url });
    actors.push(await startActor(['catalog'], env));
    actors.push(await startActor(['planner'], env));
    actors.push(await startActor(['worker'], env));
  }, 60_000);
  afterAll(async () => {
    const codes = await Promise.all(actors.map((a) => a.stop()));
    await nats?.dispose();
    expect(codes).toEqual([0, 0, 0]);
  });

  it('runs the same task over NATS and follows its events to run.completed', async () => {
    const r = await runAgentmesh([
      'run',
      '--nats',
      nats.url,
      '--script',
      'examples/add.json',
      '--json',
      'add 2 and 3',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const events = parseEvents(r.stdout);
    expectAddRun(events);
    const started = events.find((e) => e.type === 'tool.started');
    expect(started?.type === 'tool.started' && started.worker_id).toMatch(/\d/);
  });

  it('lists the fleet with status and the tools with tools list', async () => {
    const status = await runAgentmesh(['status', '--nats', nats.url, '--json']);
    expect(status.code, status.stderr).toBe(0);
    const report = JSON.parse(status.stdout) as { services: { name: string }[]; tools: number };
    expect(report.services.map((s) => s.name).sort()).toEqual([
      'agentmesh-catalog',
      'agentmesh-planner',
      'agentmesh-tool-worker',
    ]);
    expect(report.tools).toBeGreaterThanOrEqual(4);
    const tools = await runAgentmesh(['tools', 'list', '--nats', nats.url]);
    expect(tools.stdout).toMatch(/math\.calc/);
    expect(tools.stdout).toMatch(/crypto\.sha256/);
    const search = await runAgentmesh(['tools', 'search', '--nats', nats.url, 'hash text sha256']);
    expect(search.stdout.split('\n')[0]).toMatch(/crypto\.sha256/);
  });
});

describe('actor commands', () => {
  it('serve /healthz and /readyz on --health-port, and exit 0 on SIGTERM', async () => {
    const nats = await startNatsServer();
    const { freePort } = await import('./helpers/nats-server.js');
    const port = await freePort();
    const worker = await startActor(
      ['worker', '--nats', nats.url, '--health-port', String(port)],
      cleanEnv(),
    );
    try {
      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(health.status).toBe(200);
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(ready.status).toBe(200);
      expect(await ready.text()).toMatch(/ready/);
      expect((await fetch(`http://127.0.0.1:${port}/nope`)).status).toBe(404);
    } finally {
      expect(await worker.stop()).toBe(0);
      await nats.dispose();
    }
  });

  it('waits, saying so, when NATS is unreachable (actors-bad-start.test.ts: until it comes up)', async () => {
    const worker = await startActor(['worker', '--nats', 'nats://127.0.0.1:1'], cleanEnv(), /retrying in/);
    try {
      expect(worker.logs()).toMatch(
        /waiting for NATS at nats:\/\/127\.0\.0\.1:1: cannot connect to NATS at nats:\/\/127\.0\.0\.1:1/,
      );
      expect(worker.child.exitCode).toBeNull();
    } finally {
      await worker.stop('SIGKILL');
    }
  });

  it('exit 2 and say so when the server has no JetStream', async () => {
    const plain = await startNatsServer({ jetstream: false });
    try {
      const r = await runAgentmesh(['catalog', '--nats', plain.url]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/no JetStream/);
      expect(r.stderr).toMatch(/-js/);
    } finally {
      await plain.dispose();
    }
  });
});
