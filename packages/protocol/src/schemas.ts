/** Every message schema of the contract. Types are inferred from these; JSON Schema files are generated from them. */
import {
  ArtifactFetchReplySchema,
  ArtifactFetchSchema,
  CatalogDeregisterSchema,
  CatalogGetReplySchema,
  CatalogGetSchema,
  CatalogHeartbeatSchema,
  CatalogListReplySchema,
  CatalogListSchema,
  CatalogRegisterReplySchema,
  CatalogRegisterSchema,
  CatalogSearchReplySchema,
  CatalogSearchSchema,
} from './schemas/catalog.js';
import { ErrorPayloadSchema } from './schemas/common.js';
import { RunEventSchema } from './schemas/events.js';
import { CancelRequestSchema, RunRequestSchema } from './schemas/run.js';
import {
  ToolInvocationSchema,
  ToolOutcomeSchema,
  ToolProgressSchema,
  ToolCapacitySchema,
  ToolSpecSchema,
} from './schemas/tools.js';

export * from './schemas/common.js';
export * from './schemas/run.js';
export * from './schemas/events.js';
export * from './schemas/tools.js';
export * from './schemas/catalog.js';
export * from './schemas/tenants.js';
export * from './schemas/guardrails.js';

/** Every schema that gets a JSON Schema file for clients in other languages. */
export const PUBLIC_SCHEMAS = {
  RunRequest: RunRequestSchema,
  RunEvent: RunEventSchema,
  CancelRequest: CancelRequestSchema,
  ToolSpec: ToolSpecSchema,
  ToolInvocation: ToolInvocationSchema,
  ToolOutcome: ToolOutcomeSchema,
  ToolProgress: ToolProgressSchema,
  ToolCapacity: ToolCapacitySchema,
  CatalogRegister: CatalogRegisterSchema,
  CatalogRegisterReply: CatalogRegisterReplySchema,
  CatalogDeregister: CatalogDeregisterSchema,
  CatalogHeartbeat: CatalogHeartbeatSchema,
  CatalogList: CatalogListSchema,
  CatalogListReply: CatalogListReplySchema,
  CatalogGet: CatalogGetSchema,
  CatalogGetReply: CatalogGetReplySchema,
  CatalogSearch: CatalogSearchSchema,
  CatalogSearchReply: CatalogSearchReplySchema,
  ArtifactFetch: ArtifactFetchSchema,
  ArtifactFetchReply: ArtifactFetchReplySchema,
  ErrorPayload: ErrorPayloadSchema,
} as const;
