import { resolve } from 'node:path';
import { collectSkills, loadSkillDirs, type Skill } from '@agentmesh/planner';
import type { AgentMeshConfig } from './config.js';

/** The skills of the configuration: the inline list, then every file of `skills.dirs` (relative to the cwd). */
export function configuredSkills(config: AgentMeshConfig, cwd: string = process.cwd()): Skill[] {
  const section = config.skills;
  if (section === undefined) return [];
  if (Array.isArray(section)) return collectSkills(section);
  const files = loadSkillDirs((section.dirs ?? []).map((dir) => resolve(cwd, dir)));
  return collectSkills(section.list ?? [], files);
}
