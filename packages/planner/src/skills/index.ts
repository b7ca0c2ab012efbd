import type { RunRequest } from '@agentmesh/protocol';
import type { SkillState } from '../model/skill.js';
import { SkillMatchSchema, type Skill, type SkillMatchInput } from '../model/skill.js';
import { SkillSession } from './skill-session.js';

export {
  SkillSchema,
  SkillMatchSchema,
  type Skill,
  type SkillInput,
  type SkillMatch,
} from '../model/skill.js';
export type { SkillMatchInput, SkillState } from '../model/skill.js';
export { collectSkills, loadSkillDirs, parseSkillFile } from './load.js';
export { SkillSession, FORCED_REASON } from './skill-session.js';
export { MetadataMatcher, type SkillCandidate } from './match.js';

/**
 * The skill session of a run, or undefined when there is nothing to do: no skill configured, or the request turned
 * matching off (`skills: []`). `state` is the run snapshot's skill state (created when absent). `carried`: the
 * skills active at the end of the session's previous run, activated again at the first turn of a matching run.
 */
export function skillSession(
  skills: readonly Skill[] | undefined,
  match: SkillMatchInput | undefined,
  request: RunRequest,
  holder: { skills?: SkillState | undefined },
  options: { carried?: readonly string[] | undefined } = {},
): SkillSession | undefined {
  if (skills === undefined || skills.length === 0) {
    if (request.skills === undefined || request.skills.length === 0) return undefined;
  }
  const carried = request.skills === undefined && holder.skills === undefined ? (options.carried ?? []) : [];
  if (request.skills !== undefined && request.skills.length === 0) return undefined;
  const state = (holder.skills ??= { active: [] });
  return new SkillSession(skills ?? [], SkillMatchSchema.parse(match ?? {}), state, {
    forced: request.skills ?? [],
    matching: request.skills === undefined,
    carried,
  });
}
