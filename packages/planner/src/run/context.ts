import type {
  Backend,
  Identity,
  Logger,
  RunLimits,
  RunRequest,
  RunStatus,
  Subjects,
  ToolSpec,
} from '@agentmesh/protocol';
import type { SubagentConfig, ToolScope } from './setup.js';

export type { ToolScope } from './setup.js';
import type { ModelCapabilities } from '../capabilities.js';
import { ToolExposure } from '../exposure.js';
import { LoopDetector, type LoopThresholds } from '../loop-detector.js';
import type { Price, PriceTable } from '../prices.js';
import type { ModelProvider } from '../providers/types.js';
import type { CheckpointHook, RunSnapshot } from '../model/snapshot.js';
import type { PlannerTools, RunDaemon, RunGuardrails, RunHitl, RunQuota, RunSkills } from './ports.js';
import type { RunEventSink } from './events.js';

/** Why a run was stopped from outside its loop. */
export interface StopReason {
  status: 'cancelled' | 'timeout';
  reason: string;
}

/** What a run needs from its planner: the bus, the model, the settings; none of it changes during the run. */
export interface RunEnvironment {
  bus: Backend;
  prefix: string;
  subjects: Subjects;
  plannerId: string;
  logger: Logger;
  provider: ModelProvider;
  capabilities: ModelCapabilities;
  prices: PriceTable;
  price: Price | undefined;
  /** How long catalog and artifact requests ride out a restart before failing. */
  catalogRetryMs: number;
  searchLimit: number;
  loopThresholds: LoopThresholds;
  nudge: string;
  scope: ToolScope;
  /** `subagents:` settings (depth and fan-out of child runs). */
  subagents?: SubagentConfig | undefined;
  /** Called after each model turn and tool batch. */
  checkpoint?: CheckpointHook | undefined;
  /** Called after each single tool result inside a batch (durable runs store these too). */
  resultCheckpoint?: CheckpointHook | undefined;
  /** Approvals (and the run's waiting state) when calls may wait for a human decision. */
  hitl?: RunHitl<RunContext> | undefined;
  /** Tools the planner answers itself beyond the meta-tools (agent.*). */
  tools?: PlannerTools<RunContext> | undefined;
  /** The daily budget of the run's tenant (fleets with `tenants:` configured). */
  quota?: RunQuota | undefined;
  /** The run's guardrail rules (configured and requested) and their judge; undefined when it has none. */
  guardrails?: RunGuardrails | undefined;
}

/**
 * Everything one run works on: the snapshot (transcript, budget counters, exposure state), the tool exposure, the
 * loop detector, the abort signal and the event sink. The turn, dispatch and meta-tool code all take a RunContext.
 */
export class RunContext {
  readonly request: RunRequest;
  readonly limits: RunLimits;
  readonly identity: Identity;
  readonly exposure: ToolExposure;
  readonly loopDetector: LoopDetector;
  readonly log: Logger;
  costWarned = false;
  /**
   * The run resumed inside a batch of tool calls: those without a result may have been sent by the planner that was
   * lost. Cleared once that batch is dispatched.
   */
  resumedInBatch = false;
  /** Skill matching and activation before each model turn (runs with skills only). */
  skills: RunSkills<RunContext> | undefined;
  /** Idle and wake between turns instead of ending (daemon runs only). */
  daemon: RunDaemon<RunContext> | undefined;

  constructor(
    readonly state: RunSnapshot,
    specs: readonly ToolSpec[],
    readonly env: RunEnvironment,
    readonly control: { sink: RunEventSink; signal: AbortSignal; stopReason: () => StopReason | undefined },
  ) {
    this.request = state.request;
    this.limits = state.limits;
    this.identity = state.request.identity ?? { tenant: 'default' };
    this.exposure = new ToolExposure({
      specs,
      mode: state.search.mode,
      nativeVariant: state.search.native_variant,
      maxTools: env.capabilities.max_tools,
      budgetTokens: state.search.budget_tokens,
      state: state.exposure,
    });
    this.loopDetector = new LoopDetector(state.loop, env.loopThresholds);
    this.log = env.logger;
  }

  get sink(): RunEventSink {
    return this.control.sink;
  }

  get signal(): AbortSignal {
    return this.control.signal;
  }

  /** The status the run ends with when it was stopped from outside (cancel, timeout), else undefined. */
  stopCheck(): { status: RunStatus; reason: string } | undefined {
    return this.signal.aborted
      ? (this.control.stopReason() ?? { status: 'cancelled', reason: 'cancelled' })
      : undefined;
  }

  async checkpoint(): Promise<void> {
    this.state.seq = this.sink.lastSeq;
    if (this.env.checkpoint) await this.env.checkpoint(this.state);
  }

  /** After one tool result inside a batch (a no-op unless the run is durable). */
  async resultCheckpoint(): Promise<void> {
    if (this.signal.aborted || this.env.resultCheckpoint === undefined) return;
    this.state.seq = this.sink.lastSeq;
    await this.env.resultCheckpoint(this.state);
  }

  catalogOptions(): { timeoutMs: number; retryForMs: number; signal: AbortSignal } {
    return { timeoutMs: 5_000, retryForMs: this.env.catalogRetryMs, signal: this.signal };
  }
}
