import { matchesAnyToolPattern, toProviderAlias, type ToolSpec } from '@agentmesh/protocol';
import { META_TOOLS } from './meta-tool-specs.js';
import type { ModelTool, NativeSearchVariant } from './providers/types.js';
import type { ExposureState, SearchMode } from './model/snapshot.js';

export type { ExposureState, SearchMode } from './model/snapshot.js';

export interface ExposureOptions {
  specs: readonly ToolSpec[];
  mode: SearchMode;
  nativeVariant?: NativeSearchVariant | undefined;
  /** Soft cap on the token footprint of promoted schemas (chars / 4); the oldest promoted go first. */
  budgetTokens?: number | undefined;
  maxTools: number;
  state?: ExposureState;
}

export interface TurnTools {
  tools: ModelTool[];
  /** Canonical names the model may call this turn (what `llm.request` reports). */
  offered: string[];
  evicted: string[];
}

export function estimateTokens(tool: { name: string; description: string; input_schema: unknown }): number {
  return Math.ceil(
    (tool.name.length + tool.description.length + JSON.stringify(tool.input_schema).length) / 4,
  );
}

function toModelTool(spec: ToolSpec): ModelTool {
  return { name: spec.name, description: spec.description, input_schema: spec.input_schema };
}

/**
 * Decides which tools each turn offers: always-loaded tools, promoted deferred tools, and the meta-tools. Tools
 * found by a search join on the next turn, never the turn of the search.
 */
export class ToolExposure {
  readonly state: ExposureState;
  private readonly specs = new Map<string, ToolSpec>();
  private readonly always: string[] = [];
  private readonly deferred = new Set<string>();
  private offered = new Set<string>();
  private scope: readonly string[] | undefined;

  constructor(private readonly options: ExposureOptions) {
    this.state = options.state ?? { promoted: [], pending: [], surfaced: [], artifacts: false };
    for (const spec of options.specs) this.addSpec(spec);
    this.offered = new Set(this.state.offered ?? []);
  }

  get mode(): SearchMode {
    return this.options.mode;
  }

  private addSpec(spec: ToolSpec): void {
    if (this.specs.has(spec.name)) return;
    this.specs.set(spec.name, spec);
    if (spec.loading === 'deferred' && this.options.mode !== 'off') this.deferred.add(spec.name);
    else this.always.push(spec.name);
  }

  /** Adds specs learned later (tool_get, a search hit the initial list did not carry). */
  learn(specs: readonly ToolSpec[]): void {
    for (const s of specs) this.addSpec(s);
  }

  spec(name: string): ToolSpec | undefined {
    return this.specs.get(name);
  }

  get hasDeferred(): boolean {
    return this.deferred.size > 0;
  }

  isDeferred(name: string): boolean {
    return this.deferred.has(name);
  }

  deferredSpecs(): ToolSpec[] {
    return [...this.deferred].map((n) => this.specs.get(n)!);
  }

  /** Queues deferred tools found by a search for the next turn; returns the ones newly queued. */
  promote(names: readonly string[]): string[] {
    const added: string[] = [];
    for (const name of names) {
      if (!this.deferred.has(name) || this.state.pending.includes(name)) continue;
      if (this.state.promoted.includes(name)) continue;
      this.state.pending.push(name);
      added.push(name);
    }
    return added;
  }

  /** Native search surfaced these tools: the provider loaded them already. */
  surface(names: readonly string[]): void {
    for (const name of names)
      if (this.deferred.has(name) && !this.state.surfaced.includes(name)) this.state.surfaced.push(name);
  }

  noteArtifact(): void {
    this.state.artifacts = true;
  }

  /** Whether the model may call `name` now. */
  isCallable(name: string): boolean {
    return this.offered.has(name) || (this.options.mode === 'native' && this.state.surfaced.includes(name));
  }

  /** Whether `name` exists for this run at all (known to the catalog within the allow-list, or a meta-tool). */
  isKnown(name: string): boolean {
    return this.specs.has(name) || name in META_TOOLS;
  }

  /**
   * Narrows the tools offered (meta-tools aside) to these names or globs, as active skills do, and offers the
   * deferred ones among them directly; `undefined` lifts the narrowing. Returns the known tools inside the scope.
   */
  narrow(patterns: readonly string[] | undefined): string[] | undefined {
    this.scope = patterns;
    return patterns === undefined ? undefined : [...this.specs.keys()].filter((n) => this.inScope(n));
  }

  private inScope(name: string): boolean {
    return this.scope === undefined || matchesAnyToolPattern(name, this.scope);
  }

  /** Applies pending promotions and budget eviction, and returns this turn's tool list. */
  beginTurn(): TurnTools {
    const s = this.state;
    for (const name of s.pending.splice(0)) if (!s.promoted.includes(name)) s.promoted.push(name);
    const evicted: string[] = [];
    const budget = this.options.budgetTokens;
    if (budget !== undefined && budget > 0) {
      const cost = () => s.promoted.reduce((n, name) => n + estimateTokens(this.specs.get(name)!), 0);
      while (s.promoted.length > 1 && cost() > budget) evicted.push(s.promoted.shift()!);
    }
    const meta: string[] = [];
    if (this.options.mode === 'client' && this.deferred.size > 0) meta.push('tool_search', 'tool_get');
    if (s.artifacts) meta.push('artifact_fetch');
    const visible = () => {
      const names = [...this.always, ...s.promoted];
      if (this.scope !== undefined) for (const n of this.deferred) if (!names.includes(n)) names.push(n);
      return names.filter((n) => this.inScope(n));
    };
    let regular = visible();
    const max = this.options.maxTools;
    const room = Math.max(0, max - meta.length - (this.options.mode === 'native' ? 1 : 0));
    while (regular.length > room && s.promoted.length > 0) {
      evicted.push(s.promoted.shift()!);
      regular = visible();
    }
    if (regular.length > room) regular = regular.slice(0, room);
    const tools: ModelTool[] = regular.map((n) => toModelTool(this.specs.get(n)!));
    for (const m of meta) tools.push(META_TOOLS[m as keyof typeof META_TOOLS]);
    if (this.options.mode === 'native')
      for (const name of this.deferred)
        if (!regular.includes(name) && this.inScope(name))
          tools.push({ ...toModelTool(this.specs.get(name)!), defer_loading: true });
    const offered = [...regular, ...meta];
    this.offered = new Set(offered);
    s.offered = offered;
    return { tools, offered, evicted };
  }

  /** Deferred tools as `{name, description}` for the optional stub listing (provider aliases). */
  stubs(): { name: string; description: string }[] {
    return this.deferredSpecs().map((s) => ({ name: toProviderAlias(s.name), description: s.description }));
  }
}
