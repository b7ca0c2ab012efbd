import {
  AgentMeshError,
  ArtifactFetchReplySchema,
  CatalogGetReplySchema,
  CatalogListReplySchema,
  CatalogSearchReplySchema,
  ErrorCode,
  fastValidator,
  isToolName,
  itemCount,
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
 * Every run lists its tools: the reply is checked by a compiled ajv validator once a few dozen tools have been listed
 * (zod until then, and for a reply that fails it, to name the field), with the tool-name rule JSON Schema cannot carry
 * checked here. A reply counts once per tool and spec it carries.
 */
const checkListReply = fastValidator(
  CatalogListReplySchema,
  (reply) => reply.specs === undefined || reply.specs.every((spec) => isToolName(spec.name)),
  (reply) => 1 + itemCount(reply, 'tools') + itemCount(reply, 'specs'),
);

/** How many tool scopes (allow, deferred and always lists) a planner keeps the catalog's last list of. */
const TOOL_LIST_SCOPES = 64;

/** A load of one scope's tools that the runs set up at the same time wait for together. */
interface ToolListFlight {
  readonly list: Promise<readonly ToolSpec[]>;
  readonly controller: AbortController;
  waiting: number;
}

/**
 * The catalog's last full list of tools for each scope a run asked with, and the catalog `version` it came with. The
 * next run of the same scope sends that version as `cached` and, while the catalog is unchanged, gets `unchanged`
 * back instead of every spec again. Runs of one scope set up while a list is on its way wait for that list rather
 * than ask again: a burst of runs asks the catalog once per scope, not once per run.
 */
export class ToolListCache {
  private readonly lists = new Map<string, { version: string; specs: readonly ToolSpec[] }>();
  private readonly flights = new Map<string, ToolListFlight>();

  get(key: string): { version: string; specs: readonly ToolSpec[] } | undefined {
    return this.lists.get(key);
  }

  /** Keeps a full list that came in one reply with a version; forgets the scope's list otherwise. */
  remember(key: string, reply: CatalogListReply, specs: readonly ToolSpec[]): void {
    if (reply.version === undefined || reply.next_offset !== undefined) {
      this.lists.delete(key);
      return;
    }
    if (!this.lists.has(key) && this.lists.size >= TOOL_LIST_SCOPES) this.lists.clear();
    this.lists.set(key, { version: reply.version, specs: [...specs] });
  }

  /**
   * A list of its own for each caller, from the load of `key` in flight, or from a new one made with `load`. A
   * caller stops waiting when its own signal aborts; the load is aborted once no caller waits for it any more.
   */
  join(
    key: string,
    signal: AbortSignal,
    load: (signal: AbortSignal) => Promise<readonly ToolSpec[]>,
  ): Promise<ToolSpec[]> {
    if (signal.aborted) return Promise.reject(cancelledLoad(signal));
    let flight = this.flights.get(key);
    if (flight === undefined) {
      const controller = new AbortController();
      const list = load(controller.signal);
      const started: ToolListFlight = (flight = { list, controller, waiting: 0 });
      this.flights.set(key, started);
      const land = () => {
        if (this.flights.get(key) === started) this.flights.delete(key);
      };
      list.then(land, land);
    }
    const joined = flight;
    joined.waiting++;
    return new Promise((resolve, reject) => {
      let left = false;
      const leave = () => {
        if (left) return;
        left = true;
        signal.removeEventListener('abort', onAbort);
        joined.waiting--;
      };
      const onAbort = () => {
        leave();
        if (joined.waiting === 0) {
          if (this.flights.get(key) === joined) this.flights.delete(key);
          joined.controller.abort(signal.reason);
        }
        reject(cancelledLoad(signal));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      joined.list.then(
        (specs) => {
          leave();
          resolve([...specs]);
        },
        (error: unknown) => {
          leave();
          reject(error as Error);
        },
      );
    });
  }
}

function cancelledLoad(signal: AbortSignal): AgentMeshError {
  const reason: unknown = signal.reason;
  if (reason instanceof AgentMeshError) return reason;
  return new AgentMeshError(ErrorCode.Cancelled, 'the run stopped while its tools were loading', {
    ...(reason instanceof Error ? { cause: reason } : {}),
  });
}

/**
 * Loads the run's tools from the catalog (specs within the allow-list, loading resolved for this run). With a cache,
 * a catalog that says its tools are unchanged since the cached list is answered from the cache, and runs of one
 * scope loading at the same time share one request.
 */
export function loadRunTools(
  bus: Bus,
  subjects: Subjects,
  scope: ToolScope,
  options: { signal: AbortSignal; retryForMs?: number | undefined; cache?: ToolListCache | undefined },
): Promise<ToolSpec[]> {
  const { cache } = options;
  if (cache === undefined)
    return fetchRunTools(bus, subjects, scope, { ...options, key: undefined, cache: undefined });
  const key = JSON.stringify(scope);
  return cache.join(key, options.signal, (signal) =>
    fetchRunTools(bus, subjects, scope, { retryForMs: options.retryForMs, signal, key, cache }),
  );
}

async function fetchRunTools(
  bus: Bus,
  subjects: Subjects,
  scope: ToolScope,
  options: {
    signal: AbortSignal;
    retryForMs?: number | undefined;
    key: string | undefined;
    cache: ToolListCache | undefined;
  },
): Promise<ToolSpec[]> {
  const ask = (body: Record<string, unknown>): Promise<CatalogListReply> =>
    requestJsonRetrying(bus, subjects.catalogList, body, CatalogListReplySchema, {
      timeoutMs: 5_000,
      retryForMs: options.retryForMs ?? CATALOG_RETRY_MS,
      signal: options.signal,
      check: checkListReply,
    });
  const { key, cache } = options;
  try {
    const cached = key === undefined ? undefined : cache?.get(key);
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
    if (key !== undefined) cache?.remember(key, reply, specs);
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
