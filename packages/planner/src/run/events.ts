import {
  observeRunEvent,
  type ArtifactRef,
  type RunEvent,
  type RunEventBody,
  type RunRequest,
  type RunStatus,
} from '@agentmesh/protocol';
import type { RunSnapshot } from '../model/snapshot.js';
import type { EffectiveLimits } from '../model/limits.js';
import { isoNow } from '../util.js';

/**
 * Stamps a run's events with run_id, a gapless seq and ts, records them and hands them on in order. A resumed run
 * starts from the last seq already published (its earlier events seed `events`).
 */
export class RunEventSink {
  readonly events: RunEvent[] = [];
  private fenced = false;
  private seq: number;
  private readonly onEvent: ((event: RunEvent) => void) | undefined;

  constructor(
    readonly runId: string,
    private readonly publish: (event: RunEvent) => void,
    options: {
      onEvent?: ((event: RunEvent) => void) | undefined;
      /** The last seq already published (a resumed run continues after it). */
      lastSeq?: number | undefined;
      earlier?: readonly RunEvent[] | undefined;
    } = {},
  ) {
    this.onEvent = options.onEvent;
    this.seq = options.lastSeq ?? 0;
    this.events.push(...(options.earlier ?? []));
  }

  get lastSeq(): number {
    return this.seq;
  }

  /** Stops publishing: the run now belongs to another planner, whose events continue the story. */
  fence(): void {
    this.fenced = true;
  }

  /**
   * Stamps `body` and hands it on. The body becomes the event (emitters build a fresh one each time); a body that was
   * emitted before or cannot be changed is copied first.
   */
  emit<B extends RunEventBody>(body: B): B & { run_id: string; seq: number; ts: string } {
    const event = (Object.isFrozen(body) || 'seq' in body ? { ...body } : body) as B & {
      run_id: string;
      seq: number;
      ts: string;
    };
    event.run_id = this.runId;
    event.seq = ++this.seq;
    event.ts = isoNow();
    if (this.fenced) return event;
    this.events.push(event as RunEvent);
    this.publish(event as RunEvent);
    observeRunEvent(event as RunEvent);
    if (this.onEvent) {
      try {
        this.onEvent(event as RunEvent);
      } catch {
        // an observer's failure must not break the run
      }
    }
    return event;
  }
}

/** The public part of an error, as events carry it. */
export interface EventError {
  code: string;
  message: string;
  retryable?: boolean | undefined;
}

type EventOf<T extends RunEventBody['type']> = Extract<RunEventBody, { type: T }>;

/** What a tool.completed or tool.failed event says about one call. */
export interface ToolEventFields {
  call_id: string;
  name: string;
  worker_id: string;
  elapsed_ms: number;
  preview?: string | undefined;
  artifact?: ArtifactRef | undefined;
  attempts?: number | undefined;
}

/** The one builder of `tool.failed` (refused calls, meta-tools, worker errors and failed dispatches alike). */
export function toolFailed(fields: ToolEventFields, error: EventError): EventOf<'tool.failed'> {
  return {
    type: 'tool.failed',
    call_id: fields.call_id,
    name: fields.name,
    worker_id: fields.worker_id,
    elapsed_ms: fields.elapsed_ms,
    is_error: true,
    error: { code: error.code, message: error.message, retryable: error.retryable ?? false },
    preview: fields.preview || error.message,
    ...(fields.artifact ? { artifact: fields.artifact } : {}),
    ...(fields.attempts === undefined ? {} : { attempts: fields.attempts }),
  };
}

export function toolCompleted(fields: ToolEventFields): EventOf<'tool.completed'> {
  return {
    type: 'tool.completed',
    call_id: fields.call_id,
    name: fields.name,
    worker_id: fields.worker_id,
    elapsed_ms: fields.elapsed_ms,
    is_error: false,
    preview: fields.preview ?? '',
    ...(fields.artifact ? { artifact: fields.artifact } : {}),
    ...(fields.attempts === undefined ? {} : { attempts: fields.attempts }),
  };
}

export function toolStarted(callId: string, name: string, workerId: string): EventOf<'tool.started'> {
  return { type: 'tool.started', call_id: callId, name, worker_id: workerId };
}

export function notice(
  kind: string,
  message: string,
  details?: Record<string, unknown>,
): EventOf<'run.notice'> {
  return { type: 'run.notice', kind, message, ...(details === undefined ? {} : { details }) };
}

export function warning(code: string, message: string): EventOf<'run.warning'> {
  return { type: 'run.warning', code, message };
}

export function runAccepted(
  request: RunRequest,
  choice?: { kind: string; model: string },
): EventOf<'run.accepted'> {
  return {
    type: 'run.accepted',
    task: request.task,
    ...(choice ? { provider: choice.kind, model: choice.model } : {}),
    ...(request.identity ? { identity: request.identity } : {}),
    ...(request.fork ? { forked_from: { run_id: request.fork.run_id, seq: request.fork.seq } } : {}),
  };
}

/** The run waits in the fair intake: `position` among its tenant's waiting runs. */
export function runQueued(queued: {
  tenant: string;
  priority: number;
  position: number;
  submitSeq?: number | undefined;
}): EventOf<'run.queued'> {
  const { tenant, priority, position, submitSeq } = queued;
  return {
    ...{ type: 'run.queued', tenant, priority, position },
    ...(submitSeq === undefined ? {} : { submit_seq: submitSeq }),
  };
}

/** The run's start: the planner running it and its effective limits (with those held at a ceiling). */
export function runStarted(
  plannerId: string,
  resumed: boolean,
  effective: EffectiveLimits,
): EventOf<'run.started'> {
  const limits = Object.entries(effective.limits).filter(
    (entry): entry is [string, number] => entry[1] !== undefined,
  );
  return {
    type: 'run.started',
    planner_id: plannerId,
    ...(resumed ? { resumed: true } : {}),
    limits: Object.fromEntries(limits),
    ...(effective.clamped.length > 0 ? { clamped: effective.clamped } : {}),
  };
}

export function runFailed(
  error: EventError,
  refusal?: { retryable: boolean; details?: Record<string, unknown> | undefined },
): EventOf<'run.failed'> {
  const details = refusal?.details;
  return {
    type: 'run.failed',
    error: {
      code: error.code,
      message: error.message,
      retryable: refusal?.retryable ?? false,
      ...(details === undefined ? {} : { details }),
    },
  };
}

/** The final event of a run that got as far as its loop (or was stopped before). */
export function runCompleted(
  status: RunStatus,
  reason: string,
  progress:
    | (Pick<RunSnapshot, 'last_text' | 'iteration' | 'tool_calls' | 'usage'> & { output?: unknown })
    | undefined,
): EventOf<'run.completed'> {
  return {
    type: 'run.completed',
    status,
    reason,
    text: progress?.last_text ?? '',
    iterations: progress?.iteration ?? 0,
    tool_calls: progress?.tool_calls ?? 0,
    usage: progress ? { ...progress.usage } : { input_tokens: 0, output_tokens: 0 },
    ...(progress?.usage.cost_usd === undefined ? {} : { cost_usd: progress.usage.cost_usd }),
    ...(progress?.output === undefined ? {} : { output: progress.output }),
  };
}
