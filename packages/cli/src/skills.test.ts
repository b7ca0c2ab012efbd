import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './config.js';
import { plannerOptions } from './planner-options.js';
import { configuredSkills } from './skills.js';

function configFile(text: string): { dir: string; path: string } {
  const dir = mkdtempSync(join(tmpdir(), 'skills-cfg-'));
  const path = join(dir, 'agentmesh.yaml');
  writeFileSync(path, text);
  return { dir, path };
}

describe('skills in agentmesh.yaml', () => {
  it('reads an inline list and skill_match into the planner defaults', () => {
    const { path } = configFile(
      'skills:\n  - { name: hasher, description: Hashes text, allowed_tools: ["crypto.*"] }\n' +
        'skill_match: { strategy: model, top_n: 2, sticky: false }\n',
    );
    const options = plannerOptions(loadConfig(path));
    expect(options.defaults?.skills?.map((s) => s.name)).toEqual(['hasher']);
    expect(options.defaults?.skill_match).toMatchObject({ strategy: 'model', top_n: 2, sticky: false });
  });

  it('reads skill files from dirs next to an inline list', () => {
    const { dir, path } = configFile(
      'skills:\n  dirs: [skills]\n  list: [{ name: inline, description: Inline skill }]\n',
    );
    mkdirSync(join(dir, 'skills'));
    writeFileSync(join(dir, 'skills', 'reviewer.md'), '---\ndescription: Reviews diffs\n---\nBe terse.\n');
    const skills = configuredSkills(loadConfig(path), dir);
    expect(skills.map((s) => [s.name, s.prompt])).toEqual([
      ['inline', ''],
      ['reviewer', 'Be terse.'],
    ]);
  });

  it('names the bad key of a skill and of skill_match', () => {
    const bad = configFile('skills:\n  - { name: x, description: y, allowed_tool: ["a"] }\n');
    expect(() => loadConfig(bad.path)).toThrow(/skills.*allowed_tool/);
    const badMatch = configFile('skill_match: { strategy: vibes }\n');
    expect(() => loadConfig(badMatch.path)).toThrow(/skill_match\.strategy/);
  });
});
