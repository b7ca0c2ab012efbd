import type { RunEventBody } from '@agentmesh/protocol';
import type { RunContext } from '../run/context.js';
import type { RunSkills } from '../run/ports.js';
import { modelCandidates, MetadataMatcher, type SkillCandidate } from './match.js';
import type { Skill, SkillMatch, SkillState } from '../model/skill.js';

/** Why a skill is active: asked for by the request (never deactivated), or matched. */
export const FORCED_REASON = 'requested by the run';
/** Why a skill is active: it was active when the session's previous run ended. */
export const CARRIED_REASON = "active in the session's previous run";

/**
 * The skills of one run: before each model turn it matches (unless the request forced or disabled skills),
 * activates and deactivates, narrows the tool exposure to the active skills' tools and weaves their prompts into the
 * system prompt. Its state lives in the run's snapshot, so a resumed run keeps its active skills.
 */
export class SkillSession implements RunSkills<RunContext> {
  private readonly byName: Map<string, Skill>;
  private readonly matcher: MetadataMatcher;
  private readonly matchable: Skill[];

  constructor(
    private readonly skills: readonly Skill[],
    private readonly match: SkillMatch,
    readonly state: SkillState,
    private readonly run: { forced: readonly string[]; matching: boolean; carried?: readonly string[] },
  ) {
    this.byName = new Map(skills.map((s) => [s.name, s]));
    this.matchable = skills.filter((s) => !s.disable_model_invocation);
    this.matcher = new MetadataMatcher(this.matchable);
  }

  /** A message for each skill the request asked for that does not exist. */
  unknownForced(): string[] {
    const known = [...this.byName.keys()];
    return this.run.forced
      .filter((name) => !this.byName.has(name))
      .map(
        (name) =>
          `skill "${name}" is not configured${known.length > 0 ? `; known skills: ${known.join(', ')}` : ''}`,
      );
  }

  /** Runs one match pass (when matching is on), applies the result and narrows the run's tools. */
  async beforeTurn(ctx: RunContext): Promise<void> {
    const emit = (body: RunEventBody) => ctx.sink.emit(body);
    for (const name of this.run.forced)
      if (this.byName.has(name) && !this.isActive(name))
        this.activate(emit, { name, score: 0 }, FORCED_REASON);
    for (const name of this.run.carried ?? [])
      if (this.byName.has(name) && !this.isActive(name))
        this.activate(emit, { name, score: 0 }, CARRIED_REASON);
    this.run.carried = [];
    if (this.run.matching && this.matchable.length > 0) {
      const candidates = await this.candidates(ctx);
      emit({ type: 'skill.matched', candidates });
      this.apply(emit, candidates.slice(0, this.match.top_n));
    }
    const names = ctx.exposure.narrow(this.toolPatterns());
    if (!sameNames(names, this.state.scoped)) {
      this.state.scoped = names;
      if (names !== undefined) emit({ type: 'skill.scoped_tools', names });
    }
  }

  /** The run's system prompt with the active skills' prompts woven in. */
  systemPrompt(base: string): string {
    const sections = this.state.active
      .map((a) => this.byName.get(a.name))
      .filter((s): s is Skill => s !== undefined && s.prompt.trim() !== '')
      .map((s) => `Active skill "${s.name}":\n${s.prompt.trim()}`);
    return sections.length === 0 ? base : [base, ...sections].join('\n\n');
  }

  private async candidates(ctx: RunContext): Promise<SkillCandidate[]> {
    const query = matchQuery(ctx);
    if (this.match.strategy === 'metadata') return this.matcher.candidates(query, this.match.min_score);
    const { candidates, usage } = await modelCandidates(ctx.env.provider, this.matchable, {
      query,
      topN: this.match.top_n,
      signal: ctx.signal,
    });
    ctx.state.usage.input_tokens += usage.input_tokens;
    ctx.state.usage.output_tokens += usage.output_tokens;
    return candidates;
  }

  private apply(emit: (body: RunEventBody) => void, chosen: readonly SkillCandidate[]): void {
    if (!this.match.sticky) {
      const keep = new Set(chosen.map((c) => c.name));
      for (const active of [...this.state.active])
        if (active.reason !== FORCED_REASON && !keep.has(active.name)) {
          this.state.active = this.state.active.filter((a) => a.name !== active.name);
          emit({ type: 'skill.deactivated', name: active.name });
        }
    }
    for (const candidate of chosen)
      if (!this.isActive(candidate.name))
        this.activate(emit, candidate, `${this.match.strategy} match (score ${candidate.score})`);
  }

  private activate(emit: (body: RunEventBody) => void, candidate: SkillCandidate, reason: string): void {
    this.state.active.push({ name: candidate.name, score: candidate.score, reason });
    emit({ type: 'skill.activated', name: candidate.name, score: candidate.score, reason });
  }

  private isActive(name: string): boolean {
    return this.state.active.some((a) => a.name === name);
  }

  /** The union of the active skills' tools, or undefined when none narrows (no active skill, or one without a list). */
  private toolPatterns(): string[] | undefined {
    const active = this.state.active.map((a) => this.byName.get(a.name)).filter((s) => s !== undefined);
    if (active.length === 0 || active.some((s) => s.allowed_tools === undefined)) return undefined;
    return active.flatMap((s) => [...(s.allowed_tools ?? []), ...s.mcp.map((server) => `mcp.${server}.*`)]);
  }
}

/** The task, plus the latest user message when it is not the task itself. */
function matchQuery(ctx: RunContext): string {
  const task = ctx.request.task;
  for (let i = ctx.state.messages.length - 1; i >= 0; i--) {
    const message = ctx.state.messages[i]!;
    if (message.role !== 'user') continue;
    const text = message.content;
    return text === '' || text === task ? task : `${task}\n${text}`;
  }
  return task;
}

function sameNames(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.length === b.length && a.every((n, i) => n === b[i]);
}
