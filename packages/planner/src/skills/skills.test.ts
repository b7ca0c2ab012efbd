import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RunEvent } from '@agentmesh/protocol';
import { RunContext } from '../run/context.js';
import { RunEventSink } from '../run/events.js';
import type { RunSnapshot } from '../model/snapshot.js';
import { collectSkills, loadSkillDirs, parseSkillFile } from './load.js';
import { SkillMatchSchema, type Skill } from '../model/skill.js';
import { SkillSession } from './skill-session.js';

const skills: Skill[] = collectSkills([
  {
    name: 'hasher',
    description: 'Computes SHA-256 digests of text',
    keywords: ['sha256', 'hash', 'digest'],
    prompt: 'Always use crypto.sha256 for hashes.',
    allowed_tools: ['crypto.*'],
  },
  {
    name: 'calculator',
    description: 'Arithmetic: adds, subtracts, multiplies and divides numbers',
    keywords: ['sum', 'product', 'math'],
    prompt: 'Use math.calc for every operation.',
    allowed_tools: ['math.calc'],
  },
  {
    name: 'secret-ops',
    description: 'Hash digests for the operations team',
    keywords: ['sha256', 'hash'],
    disable_model_invocation: true,
  },
]);

/** A RunContext over a bare snapshot: enough for a skill session (exposure, sink, messages). */
function context(task: string, answer = ''): { ctx: RunContext; events: RunEvent[] } {
  const events: RunEvent[] = [];
  const snapshot = {
    request: { task },
    limits: {},
    search: { mode: 'client', strategy: 'bm25' },
    messages: [{ role: 'user', content: task }],
    exposure: { promoted: [], pending: [], surfaced: [], artifacts: false },
    loop: { signature: undefined, count: 0 },
    usage: { input_tokens: 0, output_tokens: 0 },
  } as unknown as RunSnapshot;
  const spec = (name: string) => ({ name, description: name, input_schema: {}, loading: 'always' }) as never;
  const provider = {
    kind: 'scripted',
    model: 'm',
    complete: () =>
      Promise.resolve({ text: answer, tool_calls: [], usage: { input_tokens: 30, output_tokens: 4 } }),
  };
  const env = { capabilities: { max_tools: 128 }, provider, loopThresholds: {} } as never;
  const ctx = new RunContext(
    snapshot,
    [spec('crypto.sha256'), spec('math.calc'), spec('fs.read_file')],
    env,
    {
      sink: new RunEventSink('r1', (e) => events.push(e)),
      signal: new AbortController().signal,
      stopReason: () => undefined,
    },
  );
  return { ctx, events };
}

function session(
  ctx: RunContext,
  options: { forced?: string[]; sticky?: boolean; strategy?: 'model' } = {},
): SkillSession {
  const state = (ctx.state.skills ??= { active: [] });
  const match = SkillMatchSchema.parse({ sticky: options.sticky ?? true, strategy: options.strategy });
  return new SkillSession(skills, match, state, {
    forced: options.forced ?? [],
    matching: options.forced === undefined,
  });
}

describe('SkillSession', () => {
  it('matches by metadata, activates the best skill, narrows the tools and weaves its prompt in', async () => {
    const { ctx, events } = context('What is the sha256 hash of "hello"?');
    const s = session(ctx);
    await s.beforeTurn(ctx);
    const matched = events.find((e) => e.type === 'skill.matched');
    expect(matched).toMatchObject({ candidates: [{ name: 'hasher' }] });
    expect(events.find((e) => e.type === 'skill.activated')).toMatchObject({ name: 'hasher' });
    expect(events.find((e) => e.type === 'skill.scoped_tools')).toMatchObject({ names: ['crypto.sha256'] });
    expect(ctx.exposure.beginTurn().offered).toEqual(['crypto.sha256']);
    expect(s.systemPrompt('BASE')).toBe(
      'BASE\n\nActive skill "hasher":\nAlways use crypto.sha256 for hashes.',
    );
  });

  it('emits skill.matched with no candidates and leaves the tools alone when nothing fits', async () => {
    const { ctx, events } = context('Tell me a joke about penguins');
    await session(ctx).beforeTurn(ctx);
    expect(events.map((e) => e.type)).toEqual(['skill.matched']);
    expect(events[0]).toMatchObject({ candidates: [] });
    expect(ctx.exposure.beginTurn().offered).toHaveLength(3);
  });

  it('non-sticky matching deactivates a skill the latest user message no longer calls for', async () => {
    const { ctx, events } = context('hash it');
    const s = session(ctx, { sticky: false });
    await s.beforeTurn(ctx);
    ctx.state.messages.push({ role: 'user', content: 'now multiply the product and sum of numbers' });
    await s.beforeTurn(ctx);
    const types = events.map((e) =>
      e.type.startsWith('skill.') ? `${e.type}:${'name' in e ? String(e.name) : ''}` : '',
    );
    expect(types).toContain('skill.activated:hasher');
    expect(types).toContain('skill.deactivated:hasher');
    expect(types).toContain('skill.activated:calculator');
    expect(ctx.exposure.beginTurn().offered).toEqual(['math.calc']);
  });

  it('forced skills activate without matching, even when model invocation is disabled', async () => {
    const { ctx, events } = context('What is the sha256 hash of "hello"?');
    await session(ctx, { forced: ['secret-ops'] }).beforeTurn(ctx);
    expect(events.map((e) => e.type)).toEqual(['skill.activated']);
    expect(events[0]).toMatchObject({ name: 'secret-ops', reason: 'requested by the run' });
    expect(ctx.exposure.beginTurn().offered).toHaveLength(3);
  });

  it('strategy model asks the run model, keeps known names only and counts its tokens', async () => {
    const { ctx, events } = context('numbers please', 'Use ["calculator", "nope", "secret-ops"]');
    await session(ctx, { strategy: 'model' }).beforeTurn(ctx);
    expect(events.find((e) => e.type === 'skill.matched')).toMatchObject({
      candidates: [{ name: 'calculator', score: 1 }],
    });
    expect(events.find((e) => e.type === 'skill.activated')).toMatchObject({ name: 'calculator' });
    expect(ctx.state.usage).toEqual({ input_tokens: 30, output_tokens: 4 });
  });

  it('never matches a skill with disable_model_invocation', async () => {
    const { ctx, events } = context('sha256 hash digest for the operations team');
    await session(ctx).beforeTurn(ctx);
    const matched = events.find((e) => e.type === 'skill.matched');
    expect(matched && 'candidates' in matched ? matched.candidates.map((c) => c.name) : []).toEqual([
      'hasher',
    ]);
  });
});

describe('skill files', () => {
  it('reads YAML and Markdown with front matter; the body is the prompt, the file name the default name', () => {
    const dir = mkdtempSync(join(tmpdir(), 'skills-'));
    writeFileSync(
      join(dir, 'reviewer.md'),
      '---\ndescription: Reviews diffs\nkeywords: [review]\n---\nBe terse.\n',
    );
    writeFileSync(join(dir, 'hasher.yaml'), 'description: Hashes\nallowed_tools: ["crypto.*"]\n');
    writeFileSync(join(dir, 'notes.txt'), 'ignored');
    const loaded = loadSkillDirs([dir]);
    expect(loaded.map((s) => [s.name, s.prompt, s.allowed_tools])).toEqual([
      ['hasher', '', ['crypto.*']],
      ['reviewer', 'Be terse.', undefined],
    ]);
  });

  it('names the file and the key of a bad skill, and a duplicate name', () => {
    expect(() => parseSkillFile('/x/bad.yaml', 'description: 3\nallowed_tools: nope\n')).toThrow(
      /invalid skill in \/x\/bad.yaml: .*allowed_tools/,
    );
    expect(() => parseSkillFile('/x/bad.md', 'no front matter')).toThrow(/front matter/);
    expect(() =>
      collectSkills([
        { name: 'a', description: 'x' },
        { name: 'a', description: 'y' },
      ]),
    ).toThrow(/skill a is declared twice/);
    expect(() => loadSkillDirs(['/nonexistent/skills'])).toThrow(/skills directory \/nonexistent\/skills/);
  });
});
