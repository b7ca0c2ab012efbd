/**
 * Issue 23, the daemon's other wake sources on a real nats-server with a stand-in OpenAI server: an input message
 * on `runs.<id>.input` wakes an idle daemon and its turn sees it; a worker with a workspace watches a daemon's
 * `watch_paths` and wakes it with one debounced `file_changed` trigger, never for a path outside the workspace or
 * under `.agentmesh/`; a daemon's transcript compaction emits `session.compacted`.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { NatsBus, silentLogger, subjects, type RunEvent } from '@agentmesh/protocol';
import { Planner, cancelRun, sendRunControl, submitRun, triggerRun } from '@agentmesh/planner';
import { ToolWorker, builtinTools } from '@agentmesh/tool-worker';
import { startOpenAiServer } from './fixtures/llm/openai-server.js';
import type { FakeLlmServer, FakeReply } from './fixtures/llm/common.js';
import { calcTool, startFakeMesh, type FakeMesh } from './fixtures/llm/mesh.js';
import { dropPrefix, uniquePrefix } from './fixtures/llm/nats.js';
import { EventBoard } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
const prefix = uniquePrefix('dw');
let client: NatsBus;
let nc: NatsConnection;
let server: FakeLlmServer;
let planner: Planner;
let worker: ToolWorker;
let mesh: FakeMesh;
let workerBus: NatsBus;
let base: string;
let root: string;
const board = new EventBoard();

const eventsOf = (runId: string) => board.of(runId);
const until = <T>(what: string, check: () => T | undefined, timeoutMs = 30000) =>
  board.until(what, check, { timeoutMs, pollMs: 50 });

const ofType = <T extends RunEvent['type']>(runId: string, type: T) =>
  eventsOf(runId).filter((e): e is Extract<RunEvent, { type: T }> => e.type === type);
const idle = (runId: string, n: number) =>
  until(`${runId} idle ${n} times`, () => (ofType(runId, 'daemon.idle').length >= n ? true : undefined));

/** A summary when asked for one; otherwise "saw <the start of the last message>". */
function reply(body: Record<string, any>): FakeReply {
  const messages = body['messages'] as { role: string; content: string }[];
  if (JSON.stringify(body).includes('You compact a conversation'))
    return { text: 'SUMMARY of the daemon so far' };
  return { text: `saw ${messages.at(-1)!.content.slice(0, 60)}` };
}

async function startDaemon(runId: string, daemon: Record<string, unknown> = {}): Promise<void> {
  await submitRun(
    client,
    {
      id: runId,
      task: 'React to what wakes you.',
      provider: 'openai',
      model: 'gpt-4o-mini',
      daemon,
    } as never,
    { prefix },
  );
  await idle(runId, 1);
}

async function endDaemon(runId: string): Promise<void> {
  await cancelRun(client, runId, { prefix });
  await until(`${runId} ended`, () => ofType(runId, 'run.completed')[0]);
}

beforeAll(async () => {
  client = await NatsBus.connect(natsUrl);
  nc = await connect({ servers: natsUrl });
  server = await startOpenAiServer(reply);
  mesh = startFakeMesh(client, [calcTool], { prefix });
  nc.subscribe(subjects(prefix).allRunEvents, {
    callback: (_err, msg) => {
      const e = msg.json<RunEvent>();
      board.add(e);
    },
  });
  await nc.flush();
  base = mkdtempSync(join(tmpdir(), 'agentmesh-watch-'));
  root = join(base, 'ws');
  mkdirSync(join(root, 'src'), { recursive: true });
  mkdirSync(join(root, '.agentmesh'), { recursive: true });
  mkdirSync(join(base, 'outside'), { recursive: true });
  symlinkSync(join(base, 'outside'), join(root, 'src', 'link'));
  workerBus = await NatsBus.connect(natsUrl);
  worker = new ToolWorker({
    bus: workerBus,
    prefix,
    tools: builtinTools(),
    logger: silentLogger(),
    register: false,
    threads: 1,
    watchRoot: root,
    watchDebounceMs: 300,
  });
  await worker.start();
  const bus = await NatsBus.connect(natsUrl);
  planner = new Planner({
    bus,
    prefix,
    logger: silentLogger(),
    plannerId: 'planner-wake',
    providers: { openaiApiKey: 'sk-test', openaiBaseUrl: server.url, maxRetries: 0, stream: false, env: {} },
    defaults: { sessions: { max_tokens: 400 } },
  });
  await planner.start();
});

afterAll(async () => {
  await Promise.race([planner.drain(), new Promise((r) => setTimeout(r, 2_000))]);
  await worker.drain();
  mesh.stop();
  await workerBus.close();
  await server.close();
  await nc.close();
  await dropPrefix(client, prefix);
  await client.close();
  rmSync(base, { recursive: true, force: true });
});

describe('daemon wake sources', { timeout: 90_000 }, () => {
  it('an input message wakes an idle daemon and its next turn sees it', async () => {
    const runId = 'dw-input';
    await startDaemon(runId);
    await sendRunControl(client, runId, { kind: 'input', text: 'INPUT-WAKES-YOU' }, { prefix });
    await until('woken by input', () =>
      ofType(runId, 'daemon.woken').find((e) => e.reason === 'input') ? true : undefined,
    );
    await idle(runId, 2);
    expect(ofType(runId, 'run.input')).toEqual([expect.objectContaining({ text: 'INPUT-WAKES-YOU' })]);
    const lastMessages = server.requests.map((b) => (b['messages'] as { content: string }[]).at(-1)!.content);
    expect(lastMessages).toContain('INPUT-WAKES-YOU');
    await endDaemon(runId);
  });

  it('a daemon with watch_paths is woken by one debounced file_changed trigger for paths inside the workspace', async () => {
    const runId = 'dw-watch';
    await startDaemon(runId, { watch_paths: ['src/**', '*.log'] });
    await until('the worker watching', () => (worker.daemonWatcher?.watching(runId) ? true : undefined));
    writeFileSync(join(root, 'src', 'a.txt'), 'one');
    writeFileSync(join(root, 'src', 'a.txt'), 'two');
    writeFileSync(join(root, 'src', 'b.txt'), 'three');
    writeFileSync(join(root, 'src', 'a.txt'), 'four');
    writeFileSync(join(root, '.agentmesh', 'secret.log'), 'never reported');
    writeFileSync(join(root, 'notes.md'), 'not watched');
    writeFileSync(join(base, 'outside', 'x.txt'), 'outside the workspace');
    const first = await until('woken by file_changed', () =>
      ofType(runId, 'daemon.woken').find((e) => e.trigger?.['kind'] === 'file_changed'),
    );
    expect(first.trigger).toEqual({ kind: 'file_changed', paths: ['src/a.txt', 'src/b.txt'] });
    await idle(runId, 2);
    writeFileSync(join(root, 'src', 'c.txt'), 'later');
    await idle(runId, 3);
    const wakes = ofType(runId, 'daemon.woken').map((e) => e.trigger);
    expect(wakes).toEqual([
      { kind: 'file_changed', paths: ['src/a.txt', 'src/b.txt'] },
      { kind: 'file_changed', paths: ['src/c.txt'] },
    ]);
    await endDaemon(runId);
    await until('the worker stops watching', () =>
      worker.daemonWatcher?.watching(runId) ? undefined : true,
    );
  });

  it('refuses watch_paths that leave the workspace, naming the problem', async () => {
    const outcome = await planner
      .execute({ task: 'x', provider: 'openai', model: 'gpt-4o-mini', daemon: { watch_paths: ['../etc/*'] } })
      .then(
        (final) => JSON.stringify(final),
        (error: Error) => error.message,
      );
    expect(outcome).toContain('may not leave the workspace');
  });

  it("compacting a daemon's transcript emits session.compacted", async () => {
    const runId = 'dw-compact';
    await startDaemon(runId);
    const pad = 'x'.repeat(700);
    for (let n = 1; n <= 4; n++) {
      await triggerRun(client, runId, { kind: 'job', n, pad }, { prefix });
      await idle(runId, n + 1);
    }
    const compacted = ofType(runId, 'session.compacted');
    expect(compacted.length).toBeGreaterThanOrEqual(1);
    expect(compacted[0]!.after_tokens).toBeLessThan(compacted[0]!.before_tokens);
    expect(eventsOf(runId).some((e) => e.type === 'run.notice' && e.kind === 'compacted')).toBe(false);
    expect(server.requests.some((b) => JSON.stringify(b).includes('SUMMARY of the daemon so far'))).toBe(
      true,
    );
    await endDaemon(runId);
  });
});
