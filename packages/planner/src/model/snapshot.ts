import type { RunEventBody, RunLimits, RunRequest, RunStatus, Usage } from '@agentmesh/protocol';
import type { ChatMessage, NativeSearchVariant } from './chat.js';

/**
 * Everything a run needs to continue, as plain JSON. The loop updates it in place and hands it to the checkpoint
 * hook after every model turn and every batch of tool results, so a run can later be resumed on another planner
 * from its last snapshot (and its events continue from `seq`).
 */
export interface RunSnapshot {
  version: 1;
  run_id: string;
  planner_id: string;
  request: RunRequest;
  provider: { kind: string; model: string };
  limits: RunLimits;
  search: {
    mode: SearchMode;
    strategy: string;
    native_variant?: NativeSearchVariant | undefined;
    budget_tokens?: number | undefined;
  };
  system: string;
  /** Model turns made so far. */
  iteration: number;
  /** Tool calls executed so far (meta-tools included, fail-closed calls not). */
  tool_calls: number;
  /** Consecutive text-only turns answered with a nudge. */
  nudges: number;
  usage: Usage;
  last_text: string;
  messages: ChatMessage[];
  exposure: ExposureState;
  loop: LoopState;
  /** Canonical names of tools that succeeded at least once. */
  succeeded: string[];
  /** The seq of the last event published. */
  seq: number;
  started_at: string;
  /** Where the loop is: about to call the model, or about to run the tool calls of the last assistant message. */
  phase: 'model' | 'tools' | 'finished';
  /**
   * The tool batch in progress (phase `tools`): what was decided for each call of the last assistant message and
   * the results that came back so far. A resumed run re-sends only the calls without a result, with the same call
   * ids (and so the same idempotency keys).
   */
  batch?: ToolBatch | undefined;
  /** Input and pause requests already applied (keys of the controls bucket), and whether the run is paused. */
  controls?: { applied_inputs: string[]; paused?: boolean } | undefined;
  status?: RunStatus;
  reason?: string;
  /** The validated final answer of a run with output_schema. */
  output?: unknown;
  /** The one repair turn for an answer that did not match output_schema was given. */
  output_repaired?: boolean | undefined;
  /** Child runs started by agent.run / agent.spawn, in start order. */
  children?: ChildRecord[] | undefined;
  /**
   * 128 random bits (hex) that salt the run ids of this run's children, so no one else can predict them. Set and
   * checkpointed before the first child is submitted; a resumed run derives the same ids from it.
   */
  child_salt?: string | undefined;
  /**
   * How many messages of the transcript the input guardrails have checked (runs with guardrails only): user messages
   * past it are input no model has seen yet.
   */
  guard_checked?: number | undefined;
  /** Active skills and their tool scope (runs with skills only). */
  skills?: SkillState | undefined;
  /** A daemon run's idle state and the last trigger it took (daemon runs only). */
  daemon?: DaemonState | undefined;
}

/** One child run of a run: `running` until its final event is seen, then its final status. */
export interface ChildRecord {
  run_id: string;
  call_id: string;
  task: string;
  status: string;
  started_at: string;
  ended_at?: string | undefined;
}

/** The plan and results of one batch of tool calls, in call order. */
export interface ToolBatch {
  calls: BatchCall[];
  /** A call was refused because max_tool_calls was reached. */
  budget_hit: boolean;
}

export interface BatchCall {
  call_id: string;
  /** `run`: dispatched (loop verdict attached); `refused`: answered by the planner, never executed. */
  plan: 'run' | 'refused';
  verdict?: { action: 'ok' | 'warn' | 'block'; count: number } | undefined;
  result?: { content: string; is_error: boolean; succeeded: boolean } | undefined;
}

/** Called with the run's snapshot after every model turn and every batch of tool results. */
export type CheckpointHook = (snapshot: Readonly<RunSnapshot>) => void | Promise<void>;

/** How deferred tools reach the model: not at all hidden, found by the planner's tool_search, or by the provider. */
export type SearchMode = 'off' | 'client' | 'native';

/** Serializable exposure state (part of a run's checkpoint). */
export interface ExposureState {
  /** Promoted deferred tools, oldest first. */
  promoted: string[];
  /** Found this turn, promoted at the start of the next one. */
  pending: string[];
  /** Surfaced by native provider search (callable at once: the provider loaded them). */
  surfaced: string[];
  /** Whether a tool result carried an artifact (artifact_fetch is offered from then on). */
  artifacts: boolean;
  /** What the current turn offered (a run resumed between a model turn and its tool calls checks calls against it). */
  offered?: string[] | undefined;
}

/** Serializable state of the detector (part of a run's checkpoint). */
export interface LoopState {
  signature: string | undefined;
  count: number;
}

/** The skills of one run in its snapshot: which are active and what their tools scope is. */
export interface SkillState {
  active: { name: string; score: number; reason: string }[];
  /** The tool names last reported in `skill.scoped_tools` (undefined: no scope). */
  scoped?: string[] | undefined;
}

/** A daemon's progress in its run snapshot. */
export interface DaemonState {
  /** Waiting for a wake source (a resumed run waits again instead of calling the model). */
  idle: boolean;
  /** The seq of the last trigger taken into the transcript. */
  handled: number;
  /** Timer ticks in a row without a trigger or input. */
  idle_ticks: number;
  /** Refused triggers already reported with a `run.warning`. */
  dropped_reported: number;
  /**
   * The `daemon.woken` of the wake checkpointed last, until it is published: a planner that stops between that
   * checkpoint and the event's append leaves it to the planner that resumes the run.
   */
  woken?: DaemonWokenEvent | undefined;
}

/** The body of a `daemon.woken` event. */
export type DaemonWokenEvent = Extract<RunEventBody, { type: 'daemon.woken' }>;
