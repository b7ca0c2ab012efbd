export {
  Planner,
  PLANNER_VERSION,
  RUNNING_LOAD_PREFIX,
  DEFAULT_DRAIN_TIMEOUT_MS,
  type DrainOptions,
  type PlannerOptions,
  type PlannerDefaults,
  type ToolSearchDefaults,
  type SystemPromptOverride,
  type ExecuteOptions,
  type RunResult,
} from './planner.js';
export * from './providers/index.js';
export {
  SCHEMA_VERSION,
  schemaVersionOf,
  isNewerSchema,
  assertKnownSchema,
  newerSchemaError,
  withSchemaVersion,
  readVersioned,
} from './model/versions.js';
export {
  CapabilityTable,
  CapabilityRuleSchema,
  DEFAULT_CAPABILITY_RULES,
  parseCapabilityRules,
  type CapabilityRule,
  type ModelCapabilities,
} from './capabilities.js';
export {
  PriceTable,
  PriceSchema,
  DEFAULT_PRICES,
  parsePrices,
  type Price,
  type PriceTableInput,
} from './prices.js';
export {
  ToolExposure,
  estimateTokens,
  type SearchMode,
  type ExposureState,
  type TurnTools,
} from './exposure.js';
export {
  LoopDetector,
  DEFAULT_LOOP_THRESHOLDS,
  type LoopThresholds,
  type LoopState,
  type LoopVerdict,
} from './loop-detector.js';
export { META_TOOLS, META_TOOL_NAMES, isMetaTool, type MetaToolName } from './meta-tool-specs.js';
export {
  buildSystemPrompt,
  runSystemPrompt,
  UNTRUSTED_TOOL_OUTPUT_NOTICE,
  DEFAULT_AGENT_PROMPT,
} from './system-prompt.js';
export { LoopErrorCode } from './run/dispatch.js';
export { DEFAULT_NUDGE } from './run/loop.js';
export { canonicalName } from './run/turn.js';
export type { RunSnapshot, CheckpointHook } from './model/snapshot.js';
export { RunEventSink } from './run/events.js';
export {
  readTranscript,
  readRunRecord,
  transcriptToScript,
  replayEvents,
  transcriptsBucket,
  runsBucket,
  type RunTranscript,
  type RunRecord,
} from './infra/transcripts.js';
export { submitRun, followRun, forkRequest, type ForkChoice, type SubmitResult } from './infra/run-client.js';
export {
  readRunEvents,
  lastStoredEvent,
  readCheckpoint,
  checkpointsBucket,
  openCheckpoints,
  RunLease,
  CheckpointWriter,
  DEFAULT_LEASE_MS,
  DEFAULT_CHECKPOINT_TTL_MS,
  type DurabilityOptions,
  type StoredCheckpoint,
  type LeaseClaim,
} from './durable/index.js';
export type { ToolBatch, BatchCall } from './model/snapshot.js';
export {
  listRuns,
  listForks,
  showRun,
  cancelRun,
  cancelTookEffect,
  type CancelledRun,
  type RunDetails,
  type RunFork,
} from './infra/run-admin.js';
export { ForkRefusal, forkPoints, forkState } from './forks/index.js';
export type { ForkStart } from './model/fork.js';
export {
  ApprovalStore,
  approvalIdFor,
  type ApprovalRecord,
  type ApprovalState,
} from './hitl/approval-store.js';
export { approvalPolicy, approvalReason, type ApprovalConfig } from './approval-policy.js';
export {
  serveApprovals,
  sendApprovalDecision,
  type ApprovalReply,
  type ApprovalSendResult,
} from './hitl/approval-service.js';
export { APPROVAL_DENIED } from './hitl/call-gate.js';
export { openApprovals, approvalsBucket } from './infra/backend.js';
export {
  RunControlStore,
  sendRunControl,
  serveRunControls,
  type RunControlResult,
} from './hitl/run-controls.js';
export { ControlLedger } from './infra/control-ledger.js';
export { openRunControls, controlsBucket } from './infra/backend.js';
export {
  SessionStore,
  assertSessionId,
  type SessionRecord,
  type SessionSummary,
} from './hitl/session-store.js';
export { openSessionStores, sessionsBucket, sessionIndexBucket } from './infra/backend.js';
export type { SessionDefaults } from './run/setup.js';
export { childRunId } from './agents/children.js';
export { AGENT_TOOL_NAMES, type AgentToolName } from './agents/agent-tools.js';
export type { SubagentConfig } from './agents/child-rules.js';
export type { ChildRecord } from './model/snapshot.js';
export { runTree, formatRunTree, type RunTreeNode } from './agents/run-tree.js';
export {
  SkillSchema,
  SkillMatchSchema,
  collectSkills,
  loadSkillDirs,
  parseSkillFile,
  type Skill,
  type SkillInput,
  type SkillMatch,
  type SkillMatchInput,
} from './skills/index.js';
export {
  DaemonSession,
  TriggerQueue,
  DAEMON_TIMEOUT_MS,
  DEFAULT_MAX_PENDING_TRIGGERS,
  MAX_TRIGGER_BYTES,
  TRIGGERS_STORE_MAX_BYTES,
  type TriggerLimits,
  triggerRun,
  daemonStatuses,
  TriggerReplySchema,
  type TriggerReply,
  type DaemonInputSource,
  type DaemonState,
} from './daemon/index.js';
export { triggersBucket, openTriggerStore } from './infra/backend.js';
export { openRunRecords } from './infra/backend.js';
export { tenantQueues, queuedRuns, type TenantQueue } from './fair/queue-view.js';
export { tenantWaitingBucket } from './infra/backend.js';
export {
  followTenantRun,
  submitAsTenant,
  tenantRunHistory,
  tenantRequest,
  mirrorTenantEvents,
  serveTenantApi,
  type TenantApiDeps,
  type TenantSessionStore,
} from './tenancy/index.js';
export {
  openTenantUsage,
  tenantUsageBucket,
  tenantUsageReport,
  type TenantUsage,
  type TenantUsageReport,
} from './budgets/index.js';
export { StreamRedactor, redactionMarker, type RedactorStep } from './stream-redactor.js';
export {
  GUARDRAIL_HOLD_MAX_CHARS,
  compileGuardrails,
  mergeGuardrails,
  type GuardrailSet,
  type TextRule,
} from './guardrail-rules.js';
