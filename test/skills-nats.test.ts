import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { NatsBus, silentLogger, type RunEvent, type RunRequestInput } from '@agentmesh/protocol';
import { Planner, collectSkills } from '@agentmesh/planner';
import { startOpenAiServer } from './fixtures/llm/openai-server.js';
import type { FakeLlmServer } from './fixtures/llm/common.js';
import { ofType } from './fixtures/llm/harness.js';
import { calcTool, countTool, sha256Tool, startFakeMesh, type FakeMesh } from './fixtures/llm/mesh.js';
import { dropPrefix, uniquePrefix } from './fixtures/llm/nats.js';

const natsUrl = inject('natsUrl');
const prefix = uniquePrefix('sk');
let bus: NatsBus;
let mesh: FakeMesh;
let planner: Planner;
let server: FakeLlmServer;

const HASHER_PROMPT = 'HASHER-SKILL: hash with crypto.sha256 and answer with the hex digest only.';

const skills = collectSkills([
  {
    name: 'hasher',
    description: 'Computes SHA-256 digests of text',
    keywords: ['sha256', 'hash', 'digest'],
    prompt: HASHER_PROMPT,
    allowed_tools: ['crypto.*'],
  },
  {
    name: 'calculator',
    description: 'Arithmetic on numbers: add, subtract, multiply, divide',
    keywords: ['sum', 'product', 'math'],
    prompt: 'CALCULATOR-SKILL: use math.calc.',
    allowed_tools: ['math.calc'],
  },
  {
    name: 'counter',
    description: 'Counts characters in a text',
    keywords: ['count', 'occurrences', 'letters'],
    prompt: 'COUNTER-SKILL: use strings.count_char.',
    allowed_tools: ['strings.*'],
  },
]);

/** Tool names and system prompt of each request the stand-in OpenAI server received, in order. */
function wire(from: number): { tools: string[]; system: string }[] {
  return server.requests.slice(from).map((body) => ({
    tools: ((body['tools'] ?? []) as { function: { name: string } }[]).map((t) => t.function.name).sort(),
    system: String((body['messages'] as { role: string; content: string }[])[0]?.content ?? ''),
  }));
}

async function run(
  request: RunRequestInput,
): Promise<{ events: RunEvent[]; requests: ReturnType<typeof wire> }> {
  const before = server.requests.length;
  const events: RunEvent[] = [];
  const final = await planner.execute(
    { provider: 'openai', model: 'gpt-4o-mini', tool_search: 'off', ...request },
    { onEvent: (e) => events.push(e) },
  );
  expect(final).toMatchObject({ type: 'run.completed', status: 'done' });
  return { events, requests: wire(before) };
}

beforeAll(async () => {
  bus = await NatsBus.connect(natsUrl);
  mesh = startFakeMesh(bus, [calcTool, sha256Tool, countTool], { prefix });
  server = await startOpenAiServer((body) => {
    const messages = body['messages'] as { role: string; content: string }[];
    if (messages.some((m) => m.role === 'tool')) return { text: 'done' };
    const tools = ((body['tools'] ?? []) as { function: { name: string } }[]).map((t) => t.function.name);
    if (tools.includes('crypto__sha256'))
      return { tool_calls: [{ id: 'c1', name: 'crypto__sha256', arguments: { text: 'hello' } }] };
    return { text: 'done' };
  });
  planner = new Planner({
    bus,
    prefix,
    logger: silentLogger(),
    plannerId: 'planner-skills',
    providers: { openaiApiKey: 'sk-test', openaiBaseUrl: server.url, maxRetries: 0, stream: false, env: {} },
    defaults: { skills },
  });
  await planner.start();
});

afterAll(async () => {
  await planner.drain();
  mesh.stop();
  await server.close();
  await dropPrefix(bus, prefix);
  await bus.close();
});

describe('skills over NATS with a stand-in OpenAI server', () => {
  it('matches the right skill by metadata, narrows the tools on the wire and sends its prompt', async () => {
    const { events, requests } = await run({ task: 'What is the sha256 hash digest of "hello"?' });
    const matched = ofType(events, 'skill.matched');
    expect(matched.length).toBe(2);
    expect(matched[0]!.candidates[0]).toMatchObject({ name: 'hasher' });
    expect(ofType(events, 'skill.activated')).toEqual([
      expect.objectContaining({ name: 'hasher', reason: expect.stringContaining('metadata match') }),
    ]);
    expect(ofType(events, 'skill.scoped_tools')).toEqual([
      expect.objectContaining({ names: ['crypto.sha256'] }),
    ]);
    expect(requests.map((r) => r.tools)).toEqual([['crypto__sha256'], ['crypto__sha256']]);
    expect(requests[0]!.system).toContain(HASHER_PROMPT);
    expect(requests[0]!.system).not.toContain('CALCULATOR-SKILL');
    expect(ofType(events, 'llm.request')[0]!.tools).toEqual(['crypto.sha256']);
    const skillEvent = events.findIndex((e) => e.type === 'skill.activated');
    expect(skillEvent).toBeLessThan(events.findIndex((e) => e.type === 'llm.request'));
  });

  it('activates forced skills without matching', async () => {
    const { events, requests } = await run({
      task: 'What is the sha256 hash of "hello"?',
      skills: ['calculator'],
    });
    expect(ofType(events, 'skill.matched')).toEqual([]);
    expect(ofType(events, 'skill.activated')).toEqual([
      expect.objectContaining({ name: 'calculator', reason: 'requested by the run' }),
    ]);
    expect(requests[0]!.tools).toEqual(['math__calc']);
    expect(requests[0]!.system).toContain('CALCULATOR-SKILL');
  });

  it('skills: [] disables matching: every tool, no skill prompt, no skill event', async () => {
    const { events, requests } = await run({ task: 'What is the sha256 hash of "hello"?', skills: [] });
    expect(events.filter((e) => e.type.startsWith('skill.'))).toEqual([]);
    expect(requests[0]!.tools).toEqual(['crypto__sha256', 'math__calc', 'strings__count_char']);
    expect(requests[0]!.system).not.toContain('SKILL:');
  });

  it('warns about a forced skill that does not exist, naming the known ones', async () => {
    const { events } = await run({ task: 'Say hi', skills: ['hashr'] });
    expect(ofType(events, 'run.warning')).toEqual([
      expect.objectContaining({
        code: 'unknown_skill',
        message: expect.stringContaining('known skills: hasher'),
      }),
    ]);
  });

  it('with a session, the skills active at the end of run 1 are active from the start of run 2', async () => {
    const first = await run({ task: 'What is the sha256 hash digest of "hello"?', session: 'sk-sticky' });
    expect(ofType(first.events, 'skill.activated')).toEqual([expect.objectContaining({ name: 'hasher' })]);
    const second = await run({ task: 'Say hi', session: 'sk-sticky' });
    expect(ofType(second.events, 'skill.activated')).toEqual([
      expect.objectContaining({ name: 'hasher', reason: "active in the session's previous run" }),
    ]);
    const activated = second.events.findIndex((e) => e.type === 'skill.activated');
    expect(activated).toBeLessThan(second.events.findIndex((e) => e.type === 'llm.request'));
    expect(second.requests[0]!.tools).toEqual(['crypto__sha256']);
    expect(second.requests[0]!.system).toContain(HASHER_PROMPT);
    const fresh = await run({ task: 'Say hi', session: 'sk-other' });
    expect(ofType(fresh.events, 'skill.activated')).toEqual([]);
  });
});
