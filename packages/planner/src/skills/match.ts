import { Bm25Index } from '@agentmesh/protocol';
import type { ModelProvider } from '../providers/types.js';
import type { Usage } from '@agentmesh/protocol';
import type { Skill } from '../model/skill.js';

/** A skill a match pass considered, with its score (bm25 for metadata, 1 for a model's pick). */
export interface SkillCandidate {
  name: string;
  score: number;
}

/** Scores skills by their metadata: name (twice), description and keywords (twice) against the query, bm25. */
export class MetadataMatcher {
  private readonly index: Bm25Index;

  constructor(skills: readonly Skill[]) {
    this.index = new Bm25Index(
      skills.map((s) => ({
        id: s.name,
        fields: [
          { text: s.name.replace(/[-.]/g, ' '), weight: 2 },
          { text: s.description },
          { text: s.keywords.join(' '), weight: 2 },
        ],
      })),
    );
  }

  candidates(query: string, minScore: number): SkillCandidate[] {
    return this.index
      .search(query)
      .filter((hit) => hit.score > minScore)
      .map((hit) => ({ name: hit.id, score: Math.round(hit.score * 1000) / 1000 }));
  }
}

export const SKILL_CHOICE_PROMPT =
  'You choose which skills an agent should use for a task. Answer with a JSON array of skill names from the list ' +
  '(best first, at most the number asked for), or [] when none fits. Answer with the array only.';

/**
 * Asks the run's model which skills fit the query. The answer is a JSON array of names (other text is searched
 * for known names); unknown names are ignored. Returns the picks and the usage of the call.
 */
export async function modelCandidates(
  provider: ModelProvider,
  skills: readonly Skill[],
  request: { query: string; topN: number; signal: AbortSignal },
): Promise<{ candidates: SkillCandidate[]; usage: Usage }> {
  const listing = skills.map((s) => `- ${s.name}: ${s.description}`).join('\n');
  const turn = await provider.complete({
    model: provider.model,
    system: SKILL_CHOICE_PROMPT,
    messages: [
      {
        role: 'user',
        content: `Skills:\n${listing}\n\nTask:\n${request.query}\n\nChoose at most ${request.topN}.`,
      },
    ],
    tools: [],
    parallelCalls: false,
    signal: request.signal,
  });
  const known = new Set(skills.map((s) => s.name));
  const picked = parsePicks(turn.text).filter((name) => known.has(name));
  return {
    candidates: [...new Set(picked)].map((name) => ({ name, score: 1 })),
    usage: turn.usage,
  };
}

function parsePicks(text: string): string[] {
  const array = /\[[\s\S]*\]/.exec(text);
  if (array) {
    try {
      const parsed = JSON.parse(array[0]) as unknown;
      if (Array.isArray(parsed)) return parsed.filter((x): x is string => typeof x === 'string');
    } catch {
      // not JSON: fall back to the words of the answer
    }
  }
  return text.split(/[\s,"'`[\]]+/).filter((w) => w !== '');
}
