import {
  AgentMeshError,
  CatalogSearchSchema,
  ErrorCode,
  SearchStrategySchema,
  isToolAllowed,
  resolveToolLoading,
  type CatalogGetReply,
  type CatalogGetSchema,
  type CatalogList,
  type CatalogListReply,
  type CatalogSearchReply,
  type ExposureLayer,
  type SearchStrategy,
  type ToolLoading,
  type ToolSpec,
  type ToolSummary,
} from '@agentmesh/protocol';
import { z } from 'zod';
import type { ToolAvailability } from './availability.js';
import type { DeferredIndex } from './deferred-index.js';
import type { LiveTool } from './registry.js';
import { clampSearchLimit } from './search/tool-index.js';

export const SearchRequestSchema = CatalogSearchSchema.extend({
  strategy: SearchStrategySchema.optional(),
  limit: z.number().int().optional(),
});
export type SearchRequest = z.output<typeof SearchRequestSchema>;

/** What the catalog's read side needs: the live tools of this replica, the search index, availability, limits. */
export interface CatalogQueryDeps {
  /** tool name -> the live tool in the search index, with its loading after the configured overrides, now */
  live: () => ReadonlyMap<string, { tool: LiveTool; loading: ToolLoading }>;
  index: DeferredIndex;
  availability: ToolAvailability;
  maxPayload: number;
  defaultStrategy: SearchStrategy;
  defaultLimit: number;
  maxLimit: number;
  /** The state of `live` now: it changes whenever a live tool does. */
  version: () => string;
}

/** The catalog's answers to list, get and search, from this replica's view of the live tools. */
export class CatalogQueries {
  constructor(private readonly deps: CatalogQueryDeps) {}

  private loadingOf(name: string, configured: ToolLoading, request: ExposureLayer): ToolLoading {
    if (request.always === undefined && request.deferred === undefined) return configured;
    return resolveToolLoading(name, configured, request);
  }

  /**
   * Lists matching tools sorted by name, from `offset`, at most `limit` of them and never more than fit in one
   * message; `next_offset` says where the rest starts.
   */
  list(request: CatalogList): CatalogListReply {
    const version = this.deps.version();
    if (request.cached === version) return { tools: [], unchanged: true, version };
    const text = request.text?.toLowerCase();
    const matching: { summary: ToolSummary; spec: ToolSpec }[] = [];
    const liveTools = this.deps.live();
    for (const name of [...liveTools.keys()].sort()) {
      if (!isToolAllowed(name, request.allow)) continue;
      const live = liveTools.get(name);
      if (live === undefined) continue;
      const { spec, workers } = live.tool;
      if (request.namespace !== undefined && spec.namespace !== request.namespace) continue;
      const loading = this.loadingOf(name, live.loading, request);
      if (request.loading !== undefined && loading !== request.loading) continue;
      if (text !== undefined && !`${spec.name}\n${spec.description}`.toLowerCase().includes(text)) continue;
      const summary = {
        name,
        version: spec.version,
        namespace: spec.namespace,
        description: spec.description,
        loading,
        workers: workers.length,
      };
      matching.push({ summary, spec: loading === spec.loading ? spec : { ...spec, loading } });
    }
    const offset = request.offset ?? 0;
    const end = Math.min(matching.length, offset + (request.limit ?? matching.length));
    const budget = this.deps.maxPayload - 1024;
    let bytes = 64;
    const tools: ToolSummary[] = [];
    const specs: ToolSpec[] = [];
    for (let i = offset; i < end; i++) {
      const { summary, spec } = matching[i]!;
      bytes +=
        JSON.stringify(summary).length + 1 + (request.full === true ? JSON.stringify(spec).length + 1 : 0);
      if (bytes > budget && tools.length > 0) break;
      tools.push(summary);
      if (request.full === true) specs.push(spec);
    }
    const next = offset + tools.length;
    return {
      tools,
      ...(request.full === true ? { specs } : {}),
      total: matching.length,
      ...(next < matching.length ? { next_offset: next } : {}),
      version,
    };
  }

  get(request: z.output<typeof CatalogGetSchema>): CatalogGetReply {
    const live = this.deps.live().get(request.name);
    if (live === undefined || !isToolAllowed(request.name, request.allow))
      throw new AgentMeshError(
        ErrorCode.NotFound,
        live === undefined
          ? `tool "${request.name}" is not served by any live worker`
          : `tool "${request.name}" is not in this run's allow-list`,
        { retryable: false, details: { name: request.name } },
      );
    if (!this.deps.availability.isAvailable(request.name, live.tool.workers))
      throw new AgentMeshError(
        ErrorCode.ToolUnavailable,
        `tool "${request.name}" cannot run right now (its workers report it unavailable); try again shortly`,
        { details: { name: request.name } },
      );
    const loading = this.loadingOf(request.name, live.loading, request);
    return { tool: { ...live.tool.spec, loading }, workers: live.tool.workers };
  }

  search(request: SearchRequest): CatalogSearchReply {
    const strategy = request.strategy ?? this.deps.defaultStrategy;
    const limit = clampSearchLimit(request.limit ?? this.deps.defaultLimit, this.deps.maxLimit);
    const deferredOnly = request.deferred_only ?? true;
    const liveTools = this.deps.live();
    const filter = (name: string): boolean => {
      if (!isToolAllowed(name, request.allow)) return false;
      const live = liveTools.get(name);
      if (live !== undefined && !this.deps.availability.isAvailable(name, live.tool.workers)) return false;
      if (!deferredOnly) return true;
      return live !== undefined && this.loadingOf(name, live.loading, request) === 'deferred';
    };
    const results = this.deps.index.current().search(request.query, { strategy, limit, filter });
    return { results, strategy, limit };
  }
}
