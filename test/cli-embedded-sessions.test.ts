import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAiServer } from './fixtures/llm/openai-server.js';
import type { FakeLlmServer } from './fixtures/llm/common.js';
import { cleanEnv, runAgentmesh } from './helpers/cli.js';

describe('agentmesh run --session in embedded mode, across processes', () => {
  let server: FakeLlmServer;
  const dataDir = mkdtempSync(join(tmpdir(), 'agentmesh-sessions-'));
  let env: NodeJS.ProcessEnv;
  const run = (session: string, task: string, extra: string[] = []) =>
    runAgentmesh(
      ['run', '--provider', 'openai', '--model', 'gpt-4.1-mini', '--session', session, ...extra, task],
      {
        env,
        timeoutMs: 90_000,
      },
    );

  beforeAll(async () => {
    server = await startOpenAiServer((_body, index) => ({ text: `answer number ${index + 1}` }));
    env = cleanEnv({ OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: server.url, AGENTMESH_DATA_DIR: dataDir });
  });

  afterAll(async () => {
    await server?.close();
  });

  it('a second process continues the conversation the first one started', async () => {
    const first = await run('chat-1', 'remember the word pelican');
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    const second = await run('chat-1', 'which word did I ask you to remember?');
    expect(second.code).toBe(0);
    const request = server.requests.at(-1)!;
    const texts = (request['messages'] as { role: string; content: unknown }[]).map(
      (m) => `${m.role}: ${typeof m.content === 'string' ? m.content : JSON.stringify(m.content)}`,
    );
    const firstTask = texts.findIndex(
      (t) => t.startsWith('user:') && t.includes('remember the word pelican'),
    );
    const firstAnswer = texts.findIndex((t) => t.startsWith('assistant:') && t.includes('answer number 1'));
    const secondTask = texts.findIndex((t) => t.includes('which word did I ask you to remember?'));
    expect(firstTask).toBeGreaterThanOrEqual(0);
    expect(firstAnswer).toBeGreaterThan(firstTask);
    expect(secondTask).toBeGreaterThan(firstAnswer);
  }, 180_000);

  it('agentmesh sessions list/show/fork/delete see the embedded sessions in the data dir', async () => {
    const sessions = (args: string[]) => runAgentmesh(['sessions', ...args], { env, timeoutMs: 60_000 });
    const list = await sessions(['list', '--json']);
    expect(list.code).toBe(0);
    const listed = JSON.parse(list.stdout) as { session: string; runs: number }[];
    expect(listed).toEqual([expect.objectContaining({ session: 'chat-1', runs: 2 })]);
    const show = await sessions(['show', 'chat-1']);
    expect(show.stdout).toContain('remember the word pelican');
    expect((await sessions(['fork', 'chat-1', 'chat-2'])).code).toBe(0);
    expect((await sessions(['show', 'chat-2'])).stdout).toContain('pelican');
    expect((await sessions(['delete', 'chat-2'])).code).toBe(0);
    const gone = await sessions(['show', 'chat-2']);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('no session "chat-2"');
  }, 180_000);

  it('keeps sessions per tenant: another tenant sees none of them', async () => {
    const other = await runAgentmesh(['sessions', 'list', '--tenant', 'acme', '--json'], {
      env,
      timeoutMs: 60_000,
    });
    expect(other.code).toBe(0);
    expect(JSON.parse(other.stdout)).toEqual([]);
  }, 60_000);

  it('names the file when a session file is corrupt', async () => {
    const dir = join(dataDir, 'sessions', 'transcripts', 'sessions');
    const tenantDir = join(dir, readdirSync(dir)[0]!);
    const file = join(tenantDir, 'chat-1.json');
    writeFileSync(file, '{"info": {"name": "trunc');
    const show = await runAgentmesh(['sessions', 'show', 'chat-1'], { env, timeoutMs: 60_000 });
    expect(show.code).not.toBe(0);
    expect(show.stderr).toContain(file);
    expect(show.stderr).toContain('corrupt');
    const again = await run('chat-1', 'go on');
    expect(again.code).not.toBe(0);
    expect(again.stderr + again.stdout).toContain(file);
  }, 180_000);
});
