import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, extname, join } from 'node:path';
import { parseYaml } from './yaml.js';
import { AgentMeshError, ErrorCode, describeZodError } from '@agentmesh/protocol';
import { SkillSchema, type Skill, type SkillInput } from '../model/skill.js';

const SKILL_EXTENSIONS = new Set(['.yaml', '.yml', '.md', '.markdown']);
const FRONT_MATTER = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?([\s\S]*)$/;

function invalid(message: string): AgentMeshError {
  return new AgentMeshError(ErrorCode.InvalidConfig, message);
}

/**
 * Parses one skill file: YAML, or Markdown with YAML front matter whose body is the prompt. The name defaults to
 * the file name without its extension. Every problem names the file and the key.
 */
export function parseSkillFile(path: string, text: string): Skill {
  const ext = extname(path).toLowerCase();
  let raw: unknown;
  let body: string | undefined;
  try {
    if (ext === '.md' || ext === '.markdown') {
      const match = FRONT_MATTER.exec(text);
      if (!match) throw new Error('a Markdown skill starts with YAML front matter between "---" lines');
      raw = parseYaml(match[1]!) ?? {};
      body = match[2]!.trim();
    } else raw = parseYaml(text) ?? {};
  } catch (error) {
    throw invalid(`skill file ${path} cannot be parsed: ${(error as Error).message}`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw invalid(`skill file ${path} must hold a mapping of skill fields`);
  const fields = raw as Record<string, unknown>;
  const input: Record<string, unknown> = { name: basename(path, extname(path)), ...fields };
  if (body !== undefined && body !== '' && fields['prompt'] === undefined) input['prompt'] = body;
  const result = SkillSchema.safeParse(input);
  if (!result.success) throw invalid(`invalid skill in ${path}: ${describeZodError(result.error)}`);
  return result.data;
}

/** Every skill file of the given directories, in name order; a missing directory is an error that names it. */
export function loadSkillDirs(dirs: readonly string[]): Skill[] {
  const skills: Skill[] = [];
  for (const dir of dirs) {
    let entries: string[];
    try {
      if (!statSync(dir).isDirectory()) throw new Error('not a directory');
      entries = readdirSync(dir).sort();
    } catch (error) {
      throw invalid(`skills directory ${dir} cannot be read: ${(error as Error).message}`);
    }
    for (const entry of entries) {
      if (!SKILL_EXTENSIONS.has(extname(entry).toLowerCase())) continue;
      const path = join(dir, entry);
      skills.push(parseSkillFile(path, readFileSync(path, 'utf8')));
    }
  }
  return skills;
}

/** Validates skills declared inline and from files together; a name declared twice is an error. */
export function collectSkills(inline: readonly SkillInput[], fromFiles: readonly Skill[] = []): Skill[] {
  const all = [...inline.map((s, i) => parseInline(s, i)), ...fromFiles];
  const seen = new Set<string>();
  for (const skill of all) {
    if (seen.has(skill.name)) throw invalid(`skill ${skill.name} is declared twice`);
    seen.add(skill.name);
  }
  return all;
}

function parseInline(skill: SkillInput, index: number): Skill {
  const result = SkillSchema.safeParse(skill);
  if (!result.success) throw invalid(`skills[${index}]: ${describeZodError(result.error)}`);
  return result.data;
}
