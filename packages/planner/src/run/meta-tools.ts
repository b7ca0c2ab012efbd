import {
  AgentMeshError,
  ArtifactFetchReplySchema,
  CatalogGetReplySchema,
  CatalogListReplySchema,
  CatalogSearchReplySchema,
  ErrorCode,
  fastValidator,
  isToolName,
  requestJsonRetrying,
  toErrorPayload,
  type Bus,
  type CatalogListReply,
  type SearchStrategy,
  type Subjects,
  type ToolSpec,
} from '@agentmesh/protocol';
import { toolCallTraceHeaders } from '@agentmesh/protocol';
import type { z } from 'zod';
import {
  ArtifactFetchArgsSchema,
  ToolGetArgsSchema,
  ToolSearchArgsSchema,
  type MetaToolName,
} from '../meta-tool-specs.js';
import type { RunContext, ToolScope } from './context.js';
import { parseToolArgs, type CallResult, type PreparedCall } from './calls.js';
import { toolCompleted, toolFailed, toolStarted } from './events.js';
import { canonicalName } from './turn.js';

/** How long a run waits for the catalog (or an artifact server) to answer through a restart or failover. */
export const CATALOG_RETRY_MS = 30_000;

const elapsedSince = (started: number) => Math.round((performance.now() - started) * 1000) / 1000;

/**
 * Runs a call the planner answers itself, with the usual tool events: a meta-tool (tool_search, tool_get,
 * artifact_fetch) or one of the run's {@link PlannerTools} (agent.*).
 */
export async function runMeta(
  ctx: RunContext,
  p: PreparedCall,
  name: MetaToolName | (string & {}),
): Promise<CallResult> {
  const { sink, env } = ctx;
  const started = performance.now();
  sink.emit(toolStarted(p.call.id, name, env.plannerId));
  const fields = { call_id: p.call.id, name, worker_id: env.plannerId };
  let content: string;
  try {
    const tools = env.tools;
    content = tools?.handles(name)
      ? await tools.call(ctx, p.call.id, name, p.args)
      : name === 'tool_search'
        ? await toolSearch(ctx, parseToolArgs(ToolSearchArgsSchema, p.args, name), p.call.id)
        : name === 'tool_get'
          ? await toolGet(ctx, parseToolArgs(ToolGetArgsSchema, p.args, name))
          : await artifactFetch(ctx, parseToolArgs(ArtifactFetchArgsSchema, p.args, name));
  } catch (error) {
    const e = toErrorPayload(error);
    sink.emit(toolFailed({ ...fields, elapsed_ms: Math.round(performance.now() - started) }, e));
    return { content: `error (${e.code}): ${e.message}`, isError: true, succeeded: false };
  }
  const preview = content.length > 512 ? `${content.slice(0, 509)}...` : content;
  sink.emit(toolCompleted({ ...fields, elapsed_ms: elapsedSince(started), preview, attempts: 1 }));
  return { content, isError: false, succeeded: true };
}

/** Client-side tool search: asks the catalog, promotes what it found; names are canonical, in events and for the model. */
async function toolSearch(
  ctx: RunContext,
  args: z.infer<typeof ToolSearchArgsSchema>,
  callId: string,
): Promise<string> {
  const { env, state, exposure } = ctx;
  const strategy = (state.search.strategy === 'off' ? 'bm25' : state.search.strategy) as SearchStrategy;
  const reply = await requestJsonRetrying(
    env.bus,
    env.subjects.catalogSearch,
    { ...env.scope, query: args.query, strategy, limit: args.limit ?? env.searchLimit, deferred_only: true },
    CatalogSearchReplySchema,
    { ...ctx.catalogOptions(), headers: toolCallTraceHeaders(ctx.state.run_id, callId) },
  );
  const found: { name: string; description: string }[] = [];
  for (const r of reply.results) {
    const name = canonicalName(r.name);
    if (!exposure.spec(name)) await learn(ctx, name);
    if (exposure.isDeferred(name)) found.push({ name, description: r.description });
  }
  exposure.promote(found.map((f) => f.name));
  ctx.sink.emit({
    type: 'tool.search',
    query: args.query,
    strategy: reply.strategy,
    results: found.map((f) => f.name),
    native: false,
  });
  if (found.length === 0) return JSON.stringify({ tools: [], note: 'No tools matched. Try other words.' });
  return JSON.stringify({ tools: found, note: 'These tools become callable on your next turn.' });
}

async function learn(ctx: RunContext, name: string): Promise<ToolSpec | undefined> {
  try {
    const reply = await requestJsonRetrying(
      ctx.env.bus,
      ctx.env.subjects.catalogGet,
      { ...ctx.env.scope, name },
      CatalogGetReplySchema,
      ctx.catalogOptions(),
    );
    ctx.exposure.learn([reply.tool]);
    return reply.tool;
  } catch (error) {
    if (error instanceof AgentMeshError && error.code === ErrorCode.NotFound) return undefined;
    throw error;
  }
}

async function toolGet(ctx: RunContext, args: z.infer<typeof ToolGetArgsSchema>): Promise<string> {
  const { exposure } = ctx;
  const name = canonicalName(args.name);
  if (!isToolName(name))
    throw new AgentMeshError(ErrorCode.InvalidArguments, `"${args.name}" is not a tool name`, {
      retryable: false,
    });
  const spec = exposure.spec(name) ?? (await learn(ctx, name));
  if (spec === undefined)
    throw new AgentMeshError(ErrorCode.NotFound, `no tool named "${args.name}" is available to this run`, {
      retryable: false,
    });
  const queued = exposure.promote([name]).length > 0 || exposure.state.pending.includes(name);
  return JSON.stringify({
    name: spec.name,
    description: spec.description,
    input_schema: spec.input_schema,
    callable: exposure.isCallable(name) ? 'now' : queued ? 'from your next turn' : 'no',
  });
}

async function artifactFetch(
  ctx: RunContext,
  args: z.infer<typeof ArtifactFetchArgsSchema>,
): Promise<string> {
  const reply = await requestJsonRetrying(
    ctx.env.bus,
    ctx.env.subjects.artifactFetch,
    { ref: args.ref, offset: args.offset ?? 0, max_bytes: args.max_bytes ?? 65_536, identity: ctx.identity },
    ArtifactFetchReplySchema,
    ctx.catalogOptions(),
  );
  return JSON.stringify(reply);
}

/**
 * Every run lists its tools: the reply is checked by a compiled ajv validator (zod only for a reply that fails it, to
 * name the field), with the tool-name rule JSON Schema cannot carry checked here.
 */
const checkListReply = fastValidator(
  CatalogListReplySchema,
  (reply) => reply.specs === undefined || reply.specs.every((spec) => isToolName(spec.name)),
);

/** How many tool scopes (allow, deferred and always lists) a planner keeps the catalog's last list of. */
const TOOL_LIST_SCOPES = 64;

/**
 * The catalog's last full list of tools for each scope a run asked with, and the catalog `version` it came with. The
 * next run of the same scope sends that version as `cached` and, while the catalog is unchanged, gets `unchanged`
 * back instead of every spec again.
 */
export class ToolListCache {
  private readonly lists = new Map<string, { version: string; specs: readonly ToolSpec[] }>();

  get(scope: ToolScope): { version: string; specs: readonly ToolSpec[] } | undefined {
    return this.lists.get(JSON.stringify(scope));
  }

  /** Keeps a full list that came in one reply with a version; forgets the scope's list otherwise. */
  remember(scope: ToolScope, reply: CatalogListReply, specs: readonly ToolSpec[]): void {
    const key = JSON.stringify(scope);
    if (reply.version === undefined || reply.next_offset !== undefined) {
      this.lists.delete(key);
      return;
    }
    if (!this.lists.has(key) && this.lists.size >= TOOL_LIST_SCOPES) this.lists.clear();
    this.lists.set(key, { version: reply.version, specs: [...specs] });
  }
}

/**
 * Loads the run's tools from the catalog (specs within the allow-list, loading resolved for this run). With a cache,
 * a catalog that says its tools are unchanged since the cached list is answered from the cache.
 */
export async function loadRunTools(
  bus: Bus,
  subjects: Subjects,
  scope: ToolScope,
  options: { signal: AbortSignal; retryForMs?: number | undefined; cache?: ToolListCache | undefined },
): Promise<ToolSpec[]> {
  const ask = (body: Record<string, unknown>): Promise<CatalogListReply> =>
    requestJsonRetrying(bus, subjects.catalogList, body, CatalogListReplySchema, {
      timeoutMs: 5_000,
      retryForMs: options.retryForMs ?? CATALOG_RETRY_MS,
      signal: options.signal,
      check: checkListReply,
    });
  try {
    const cached = options.cache?.get(scope);
    const reply =
      cached === undefined
        ? await ask({ ...scope, full: true })
        : await ask({ ...scope, full: true, cached: cached.version }).catch((error: unknown) => {
            // a catalog from before `cached` (a replica not yet upgraded) refuses the member: ask as it knows
            if (!(error instanceof AgentMeshError) || error.code !== ErrorCode.InvalidMessage) throw error;
            return ask({ ...scope, full: true });
          });
    if (reply.unchanged === true && cached !== undefined) return [...cached.specs];
    const specs = [...(reply.specs ?? [])];
    for (let offset = reply.next_offset; offset !== undefined;) {
      const page = await ask({ ...scope, full: true, offset });
      specs.push(...(page.specs ?? []));
      offset = page.next_offset;
    }
    options.cache?.remember(scope, reply, specs);
    return specs;
  } catch (error) {
    const e = AgentMeshError.from(error);
    if (e.code === ErrorCode.NoResponders || e.code === ErrorCode.Timeout)
      throw new AgentMeshError(
        ErrorCode.Unavailable,
        `no catalog answered on ${subjects.catalogList} (${e.code}): start one ("agentmesh catalog") or run embedded`,
        { cause: e },
      );
    throw e;
  }
}

/** The canonical names of every registered tool (no allow-list applied). */
export async function listToolNames(
  bus: Bus,
  subjects: Subjects,
  options: { signal: AbortSignal; retryForMs?: number | undefined },
): Promise<string[]> {
  const names: string[] = [];
  for (let offset: number | undefined = 0; offset !== undefined;) {
    const reply: CatalogListReply = await requestJsonRetrying(
      bus,
      subjects.catalogList,
      offset > 0 ? { offset } : {},
      CatalogListReplySchema,
      { timeoutMs: 5_000, retryForMs: options.retryForMs ?? CATALOG_RETRY_MS, signal: options.signal },
    );
    names.push(...reply.tools.map((t) => t.name));
    offset = reply.next_offset;
  }
  return names;
}
