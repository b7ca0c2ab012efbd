import type { RunStatus } from '@agentmesh/protocol';
import type { ApprovalPolicy } from '../approval-policy.js';
import type { ApprovalStore } from '../hitl/approval-store.js';
import type { RunControlStore } from '../hitl/run-controls.js';
import type { WaitingState } from './waiting.js';

/**
 * Skills of a run, as the engine calls them (skills/ implements it): before each model turn they match and narrow
 * the run's tools, and the turn's system prompt carries the active skills' prompts.
 */
export interface RunSkills<Ctx> {
  /** A message for each skill the request asked for that does not exist. */
  unknownForced(): string[];
  beforeTurn(ctx: Ctx): Promise<void>;
  systemPrompt(base: string): string;
}

/**
 * A daemon run's life between turns, as the engine calls it (daemon/ implements it): a finished turn goes idle
 * instead of ending the run, and the next turn waits for a wake.
 */
export interface RunDaemon<Ctx> {
  readonly idle: boolean;
  goIdle(ctx: Ctx): Promise<undefined>;
  /** Waits for a wake; an ending (cancel, watchdog) or undefined with the wake in the transcript. */
  wake(ctx: Ctx): Promise<{ status: RunStatus; reason: string } | undefined>;
  close(runId: string): Promise<void>;
}

/** Approvals (and the run's waiting state) when calls may wait for a human decision. */
export interface RunHitl {
  store: ApprovalStore;
  policy: ApprovalPolicy;
  waits: WaitingState;
  /** Input and pause requests (undefined: the run takes none). */
  controls?: RunControlStore | undefined;
}

/**
 * Tools the planner answers itself beyond its meta-tools, as the engine calls them (agents/ implements them: the
 * agent.* tools that start and steer child runs). Wired per planner in planner.ts.
 */
export interface PlannerTools<Ctx> {
  /** Whether the planner answers a call to this tool itself. */
  handles(name: string): boolean;
  /** Runs one call and returns the tool result text; errors are thrown, named. */
  call(ctx: Ctx, callId: string, name: string, args: unknown): Promise<string>;
  /** The run ends: stop what its calls started (its running children). */
  runEnded(ctx: Ctx): void;
}
