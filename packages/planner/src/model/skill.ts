import { z } from 'zod';

/**
 * One skill: a prompt fragment, a narrowed tool set and the MCP servers it needs, activated when a run's task calls
 * for it (matched on name, description and keywords) or when the RunRequest names it.
 */
export const SkillSchema = z
  .object({
    name: z
      .string()
      .regex(/^[a-z0-9][a-z0-9_.-]{0,63}$/, 'skill name must be 1-64 of a-z, 0-9, "_", "." or "-"'),
    description: z.string().trim().min(1, 'description must be a non-empty string'),
    keywords: z.array(z.string().min(1)).default([]),
    /** Woven into the system prompt while the skill is active. */
    prompt: z.string().default(''),
    /** Tool names or globs; while any skill is active the model sees only the union of these (plus meta-tools). */
    allowed_tools: z.array(z.string().min(1)).optional(),
    /** MCP servers the skill needs: their tools (`mcp.<server>.*`) join the skill's allowed tools. */
    mcp: z.array(z.string().min(1)).default([]),
    /** Never matched automatically: only a RunRequest's `skills` (or `--skill`) activates it. */
    disable_model_invocation: z.boolean().default(false),
  })
  .strict();
export type Skill = z.infer<typeof SkillSchema>;
export type SkillInput = z.input<typeof SkillSchema>;

/** How skills are matched each turn (`skill_match:` in agentmesh.yaml). */
export const SkillMatchSchema = z
  .object({
    strategy: z.enum(['metadata', 'model']).default('metadata'),
    top_n: z.number().int().min(1).max(16).default(1),
    sticky: z.boolean().default(true),
    /** Metadata matches scoring below this are not candidates. */
    min_score: z.number().min(0).default(0),
  })
  .strict();
export type SkillMatch = z.infer<typeof SkillMatchSchema>;
export type SkillMatchInput = z.input<typeof SkillMatchSchema>;

export type { SkillState } from './snapshot.js';
