/** The catalog's requests and replies, and artifact fetches. */
import { z } from 'zod';
import { ErrorPayloadSchema, IdentitySchema, SearchStrategySchema, ToolPatternListSchema } from './common.js';
import { ToolLoadingSchema, ToolSpecSchema } from './tools.js';

export const CatalogRegisterSchema = z
  .object({
    worker_id: z.string().min(1),
    tools: z.array(ToolSpecSchema),
    ttl_ms: z.number().int().min(100).optional(),
  })
  .strict();
export type CatalogRegister = z.infer<typeof CatalogRegisterSchema>;

export const CatalogRegisterReplySchema = z.object({
  accepted: z.array(z.string()),
  rejected: z.array(z.object({ name: z.string(), error: ErrorPayloadSchema })),
  ttl_ms: z.number().int(),
});
export type CatalogRegisterReply = z.infer<typeof CatalogRegisterReplySchema>;

export const CatalogDeregisterSchema = z.object({ worker_id: z.string().min(1) }).strict();
export type CatalogDeregister = z.infer<typeof CatalogDeregisterSchema>;

export const CatalogHeartbeatSchema = z.object({ worker_id: z.string().min(1) }).strict();
export type CatalogHeartbeat = z.infer<typeof CatalogHeartbeatSchema>;
/** `known: false` tells a worker the catalog forgot it (expired): it must register again. */
export const CatalogHeartbeatReplySchema = z.object({ known: z.boolean() });

export const ToolSummarySchema = z.object({
  name: z.string(),
  version: z.string(),
  namespace: z.string(),
  description: z.string(),
  loading: ToolLoadingSchema,
  workers: z.number().int(),
});
export type ToolSummary = z.infer<typeof ToolSummarySchema>;

const catalogScope = {
  /** A run's allow-list: canonical names, namespace prefixes or globs. Absent means every tool. */
  allow: ToolPatternListSchema.optional(),
  /** Names or globs made deferred for this request (overrides the spec). */
  deferred: ToolPatternListSchema.optional(),
  /** Names or globs made always-loaded (wins over deferred). */
  always: ToolPatternListSchema.optional(),
};

export const CatalogListSchema = z
  .object({
    ...catalogScope,
    namespace: z.string().optional(),
    loading: ToolLoadingSchema.optional(),
    text: z.string().optional(),
    full: z.boolean().optional(),
    /** Skip this many matching tools (paging; tools are sorted by name). */
    offset: z.number().int().min(0).optional(),
    /** Return at most this many; without it the reply holds as many as fit in one message. */
    limit: z.number().int().min(1).optional(),
    /**
     * The `version` of an earlier reply to this same request that the caller still holds: while the catalog's tools
     * are unchanged since, it answers `unchanged: true` with no tools, and the caller reuses what it has.
     */
    cached: z.string().max(128).optional(),
  })
  .strict();
export type CatalogList = z.infer<typeof CatalogListSchema>;
export const CatalogListReplySchema = z.object({
  tools: z.array(ToolSummarySchema),
  specs: z.array(ToolSpecSchema).optional(),
  /** How many tools matched in all. */
  total: z.number().int().optional(),
  /** Present when more tools matched than this reply holds: ask again with this offset. */
  next_offset: z.number().int().optional(),
  /** The state of the catalog replica this reply comes from: send it back as `cached` to be told when nothing changed. */
  version: z.string().optional(),
  /** The answer to a request whose `cached` version is still current: `tools` is empty, reuse the earlier reply. */
  unchanged: z.boolean().optional(),
});
export type CatalogListReply = z.infer<typeof CatalogListReplySchema>;

export const CatalogGetSchema = z.object({ name: z.string().min(1), ...catalogScope }).strict();
export type CatalogGet = z.infer<typeof CatalogGetSchema>;
export const CatalogGetReplySchema = z.object({ tool: ToolSpecSchema, workers: z.array(z.string()) });
export type CatalogGetReply = z.infer<typeof CatalogGetReplySchema>;

export const CatalogSearchSchema = z
  .object({
    ...catalogScope,
    query: z.string(),
    strategy: SearchStrategySchema.default('bm25'),
    limit: z.number().int().default(10),
    /** Only deferred tools (what a model searches for); default true. */
    deferred_only: z.boolean().optional(),
  })
  .strict();
export type CatalogSearch = z.infer<typeof CatalogSearchSchema>;
export type CatalogSearchInput = z.input<typeof CatalogSearchSchema>;
export const CatalogSearchReplySchema = z.object({
  results: z.array(z.object({ name: z.string(), score: z.number(), description: z.string() })),
  strategy: SearchStrategySchema,
  limit: z.number().int(),
});
export type CatalogSearchReply = z.infer<typeof CatalogSearchReplySchema>;

export const ArtifactFetchSchema = z
  .object({
    ref: z.string().min(1),
    offset: z.number().int().min(0).default(0),
    max_bytes: z.number().int().min(1).default(65_536),
    identity: IdentitySchema.default({ tenant: 'default' }),
  })
  .strict();
export type ArtifactFetch = z.infer<typeof ArtifactFetchSchema>;
export const ArtifactFetchReplySchema = z.object({
  ref: z.string(),
  mime: z.string(),
  size: z.number().int(),
  offset: z.number().int(),
  text: z.string(),
  eof: z.boolean(),
});
export type ArtifactFetchReply = z.infer<typeof ArtifactFetchReplySchema>;

/**
 * A worker says some of its tools cannot run right now (`available: false`, e.g. their MCP server is reconnecting)
 * or can again. Every catalog replica hears it; a tool none of whose workers can run it is left out of search, `get`
 * answers `tool_unavailable` (retryable), and it stays listed, so a call already offered gets `tool_unavailable`
 * from its worker, which the model can retry.
 */
export const CatalogAvailabilitySchema = z
  .object({
    worker_id: z.string().min(1),
    tools: z.array(z.string().min(1)),
    available: z.boolean(),
  })
  .strict();
export type CatalogAvailability = z.infer<typeof CatalogAvailabilitySchema>;
