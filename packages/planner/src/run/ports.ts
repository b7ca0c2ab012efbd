import type {
  AgentMeshError,
  Logger,
  RunEvent,
  RunRequest,
  RunStatus,
  RunWaiting,
  ToolSpec,
} from '@agentmesh/protocol';
import type { ChatMessage } from '../model/chat.js';
import type { CheckpointHook, RunSnapshot } from '../model/snapshot.js';
import type { ForkStart } from '../model/fork.js';
import type { RunTranscript } from '../model/transcript.js';
import type { ModelProvider } from '../providers/types.js';
import type { GuardrailJudge } from '../guardrail-judge.js';
import type { GuardrailSet } from '../guardrail-rules.js';
import type { CallResult } from './calls.js';
import type { RunEventSink } from './events.js';

/*
 * The engine's ports: the interfaces it calls out through. The features implement them (skills/, daemon/, hitl/,
 * agents/) and run-features.ts wires them per run; the engine never imports a feature. `Ctx` is the engine's
 * RunContext (a type parameter, so these interfaces do not import the context that holds them).
 */

/** What a run controls from outside the executor: how durability stops it when ownership is lost. */
export interface RunHandle {
  /** Stops the run at once and publishes nothing more (another planner owns it now). */
  fence(error: AgentMeshError): void;
  cancel(reason: string): void;
}

/**
 * Who keeps a run: where it resumes, what happens at each checkpoint and how it is recorded at its end. A plain run
 * record for embedded runs; a lease, KV checkpoints and takeover for durable ones (durable/takeover.ts).
 */
export interface RunKeeper {
  resume?:
    | {
        snapshot: RunSnapshot | undefined;
        lastSeq: number;
        earlier: RunEvent[];
        /** The earlier events are the intake's (`run.accepted`, `run.queued`): the run starts, it is not resumed. */
        queued?: boolean;
      }
    | undefined;
  /** Wraps the user's checkpoint hook; `flush` publishes the events emitted so far. */
  checkpoints(
    flush: () => Promise<void>,
    user: CheckpointHook | undefined,
  ): {
    checkpoint?: CheckpointHook | undefined;
    resultCheckpoint?: CheckpointHook | undefined;
  };
  attach(handle: RunHandle): void;
  /** True when the run now belongs to another planner (then it is not finalized here). */
  readonly handedOff: boolean;
  /** Hands the run over without finishing it here (durable runs: another planner resumes it). */
  giveUp?(why: string): void;
  finish(status: string, endedAt: string): Promise<void>;
  /** Records in the run record how the run waits (`awaiting_approval`, `paused`), or that it no longer does. */
  setWaiting?(waiting: RunWaiting | undefined): Promise<void>;
}

/** Where a run's events go, in order (infra/ implements it: the event log on NATS, bus messages in process). */
export interface EventPublisher {
  publish: (e: RunEvent) => void;
  flush: () => Promise<void>;
  /** Drops what is queued and publishes nothing more. */
  close: () => void;
}

/** Where finished runs' transcripts are kept (infra/ implements it over the transcript blob store). */
export interface TranscriptStore {
  save(transcript: RunTranscript): Promise<void>;
}

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
  /** Called once when a run resumes, with the events stored before the takeover (see {@link RunKeeper.resume}). */
  resumed(ctx: Ctx, stored: { lastSeq: number; earlier: readonly RunEvent[] }): void;
}

/**
 * Where input messages wait for a run (`agentmesh.runs.<id>.input`): `hasInputMarker` says whether inputs wait,
 * `watchInputs` calls back when one arrives.
 */
export interface RunInputSource {
  hasInputMarker(runId: string): Promise<boolean>;
  watchInputs(runId: string, listener: () => void): Promise<{ stop(): void }>;
}

/** A call on its way to execution, as the call gate sees it. */
export interface GateCall {
  call: { id: string; name: string };
  name: string;
  args: unknown;
}

/**
 * The human in the loop, as the engine calls it (hitl/ implements it): a gate that may hold a call for an
 * approval, and the pause and input requests applied before each model turn.
 */
export interface RunHitl<Ctx> {
  /** Undefined when the call may run, else the error result the model gets (the call was denied). */
  gate(ctx: Ctx, call: GateCall): Promise<CallResult | undefined>;
  applyControls(ctx: Ctx): Promise<void>;
  /** Where the run's input messages wait (a daemon wakes on them); undefined: the run takes none. */
  inputs?: RunInputSource | undefined;
}

/**
 * Tools the planner answers itself beyond its meta-tools, as the engine calls them (agents/ implements them: the
 * agent.* tools that start and steer child runs).
 */
export interface PlannerTools<Ctx> {
  /** Whether the planner answers a call to this tool itself. */
  handles(name: string): boolean;
  /** Runs one call and returns the tool result text; errors are thrown, named. */
  call(ctx: Ctx, callId: string, name: string, args: unknown): Promise<string>;
  /** The run ends: stop what its calls started (its running children). */
  runEnded(ctx: Ctx): void;
}

/** What a session needs to hand a run its earlier transcript, compacted past `maxTokens` by the run's own model. */
export interface StartingMessagesOptions {
  maxTokens: number;
  provider: ModelProvider;
  sink: RunEventSink;
  signal: AbortSignal;
  log: Logger;
}

/**
 * One run's hold on a conversation session, as the engine calls it (hitl/ implements it): the earlier transcript
 * the run starts from, and the save of the whole conversation at its end.
 */
export interface RunConversation {
  /** The skills active when the session's last run ended (its next run starts with them). */
  readonly activeSkills: readonly string[];
  /** The earlier transcript, compacted (with `session.compacted`) when it passes `maxTokens`. */
  startingMessages(options: StartingMessagesOptions): Promise<ChatMessage[]>;
  /** Saves the conversation and the skills active at its end, and lets the session go. */
  finish(runId: string, messages: readonly ChatMessage[], activeSkills?: readonly string[]): Promise<void>;
  /** Stops holding the session without letting it go (the run now belongs to another planner). */
  stop(): void;
}

/**
 * The daily budget of a run's tenant, as the engine calls it (budgets/ implements it): checked before each model
 * turn, and each turn's usage added to the tenant's, counted across every planner.
 */
export interface RunQuota {
  /** Why the run must end before its next model turn (its tenant's daily budget is spent), else undefined. */
  exhausted(signal: AbortSignal): Promise<string | undefined>;
  /** Adds one model turn's tokens and cost to the tenant's usage today (a cancelled run's last turn too). */
  record(turn: { tokens: number; cost_usd: number | undefined }): Promise<void>;
}

/** Records how a run waits (paused, awaiting an approval) in its run record. */
export type RecordWaiting = (waiting: RunWaiting | undefined) => Promise<void>;

/**
 * The features of one run, built per run by run-features.ts: each is undefined when the run does not use it.
 */
export interface RunFeatures<Ctx> {
  /** Tools the planner answers itself (agent.*), made for one run, and their specs as offered to this request. */
  tools(): PlannerTools<Ctx>;
  offeredTools(request: RunRequest): ToolSpec[];
  /** Whether an allow-list entry names a planner tool (so it is not reported as matching nothing). */
  matchesPlannerTool(pattern: string): boolean;
  hitl(request: RunRequest, recordWaiting: RecordWaiting): RunHitl<Ctx> | undefined;
  skills(
    request: RunRequest,
    snapshot: RunSnapshot,
    carried: readonly string[] | undefined,
  ): RunSkills<Ctx> | undefined;
  daemon(request: RunRequest, snapshot: RunSnapshot): Promise<RunDaemon<Ctx> | undefined>;
  /** The daily budget of the request's tenant; undefined when no `tenants:` are configured. */
  quota?(request: RunRequest): RunQuota | undefined;
  /** Where a fork (`request.fork`) starts: the original run's state after the seq; undefined for another run. */
  fork(request: RunRequest): Promise<ForkStart | undefined>;
  /** The session the request continues, once held (it waits for another run of it); undefined for none. */
  session(
    request: RunRequest,
    target: { tenant: string; runId: string },
    signal: AbortSignal,
  ): Promise<RunConversation | undefined>;
}

/** A run's guardrails (run/guard.ts applies them): its compiled rules and the judge that asks `type: model` rules. */
export interface RunGuardrails {
  set: GuardrailSet;
  judge: GuardrailJudge;
}
