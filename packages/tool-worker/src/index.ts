export {
  defineTool,
  type Tool,
  type ToolContext,
  type ToolDefinition,
  type CpuToolContext,
  type CpuHandlerRef,
} from './define-tool.js';
export {
  ToolWorker,
  type ToolWorkerOptions,
  DEFAULT_WORKER_CONCURRENCY,
  DEFAULT_ARTIFACT_THRESHOLD_BYTES,
  DEFAULT_MAX_OUTPUT_BYTES,
} from './worker.js';
export { DEFAULT_RETRY_POLICY, resolvePolicy, backoffDelay, classifyFailure } from './policy.js';
export {
  TenantArtifacts,
  ARTIFACT_FETCH_MAX_BYTES,
  type ArtifactStore,
  type ArtifactScope,
} from './artifacts.js';
export { capForModel, outputText } from './format.js';
export {
  OutcomeCache,
  SharedOutcomes,
  OutcomeClaim,
  toolOutcomesBucket,
  type OutcomeCacheOptions,
  type SharedOutcomeOptions,
  type SharedEntry,
} from './outcome-cache.js';
export { CpuPool, type CpuPoolOptions } from './cpu-pool.js';
export { toJsonSchema } from './schema.js';
export {
  BUILTIN_TOOL_NAMES,
  builtinTools,
  mathCalcTool,
  regexMatchTool,
  countCharTool,
  sha256Tool,
} from './packs/builtin/index.js';
export * from './packs/workspace/index.js';
export * from './mcp/index.js';
export { DaemonPathWatcher, MAX_CHANGED_PATHS, type DaemonPathWatcherOptions } from './daemon-watch.js';
