import { randomUUID } from 'node:crypto';
import {
  AgentMeshError,
  ErrorCode,
  ControlReplySchema,
  RunControlRequestSchema,
  RunInputSchema,
  decodeMessage,
  readEntries,
  encodeJson,
  newRequestId,
  requestControl,
  respondError,
  respondJson,
  runControlSubjects,
  type Bus,
  type BusMessage,
  type KvStore,
  type Logger,
  type Subscription,
  runControlSubject,
  type ControlSendOptions,
} from '@agentmesh/protocol';
import { z } from 'zod';
import { parseRecord } from '../model/record.js';
import { ControlLedger } from '../infra/control-ledger.js';

/** A user message waiting to be added to a run before its next model turn. */
export interface PendingInput {
  key: string;
  text: string;
  at: string;
}

const InputRecordSchema = z.object({ text: z.string(), at: z.string() });
const PausedRecordSchema = z.object({ paused: z.boolean(), at: z.string() });

/**
 * Input and pause requests of runs, kept in a KV bucket until the run applies them: `<run>.input.<id>` per message
 * (deleted once applied and checkpointed) and `<run>.paused`. A request made while no planner holds the run is
 * applied by the planner that resumes it.
 */
export class RunControlStore {
  /** The request ids of input, pause and resume requests with their outcomes. */
  readonly ledger: ControlLedger;

  constructor(private readonly kv: KvStore) {
    this.ledger = new ControlLedger(kv);
  }

  /** A new input's key: inputs sort by it, oldest first. */
  newInputKey(runId: string): string {
    return `${runId}.input.${Date.now().toString(36).padStart(10, '0')}${randomUUID().slice(0, 8)}`;
  }

  async addInput(runId: string, text: string, key: string = this.newInputKey(runId)): Promise<string> {
    await this.kv.put(key, encodeJson({ text, at: new Date().toISOString() }));
    await this.kv.put(`${runId}.has_input`, encodeJson({ at: new Date().toISOString() }));
    return key;
  }

  /**
   * False when the bucket holds nothing at all under the run (one read of the bucket at one instant, so neither a
   * pause nor an input marker existed then): the loop's per-turn check, before it reads each. True when it cannot
   * tell (a store without the one-read check, a failed read).
   */
  async mayHaveControls(runId: string): Promise<boolean> {
    return this.kv.mayHaveKeys === undefined ? true : this.kv.mayHaveKeys(`${runId}.>`);
  }

  /** True when inputs may be waiting (one KV get, no listing: the loop's per-turn check). */
  async hasInputMarker(runId: string): Promise<boolean> {
    return (await this.kv.get(`${runId}.has_input`)) !== null;
  }

  /** Calls back each time an input is recorded for the run (an idle daemon wakes on it). */
  watchInputs(runId: string, listener: () => void): Promise<{ stop(): void }> {
    return this.kv.watch(
      (entry) => {
        if (entry.operation === 'PUT') listener();
      },
      { key: `${runId}.has_input`, updatesOnly: true },
    );
  }

  /** After the inputs were applied and dropped: clears the marker, or keeps it when an input came meanwhile. */
  async clearInputMarker(runId: string): Promise<void> {
    await this.kv.delete(`${runId}.has_input`);
    if ((await this.inputs(runId)).length > 0)
      await this.kv.put(`${runId}.has_input`, encodeJson({ at: new Date().toISOString() }));
  }

  /** Inputs not applied yet, oldest first. */
  async inputs(runId: string): Promise<PendingInput[]> {
    const entries = await readEntries(this.kv, `${runId}.input.>`);
    return entries
      .map((entry) => {
        const value = decodeMessage(InputRecordSchema, entry.value, 'run input');
        return { key: entry.key, text: value.text, at: value.at };
      })
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async dropInput(key: string): Promise<void> {
    await this.kv.delete(key);
  }

  async setPaused(runId: string, paused: boolean): Promise<void> {
    await this.kv.put(`${runId}.paused`, encodeJson({ paused, at: new Date().toISOString() }));
  }

  async paused(runId: string): Promise<boolean> {
    const entry = await this.kv.get(`${runId}.paused`);
    return entry !== null && decodeMessage(PausedRecordSchema, entry.value, 'pause state').paused;
  }

  /** Resolves once the run is no longer paused; rejects with `cancelled` when the signal aborts. */
  async waitUntilResumed(runId: string, signal: AbortSignal): Promise<void> {
    let resumed: (() => void) | undefined;
    const done = new Promise<void>((resolve) => (resumed = resolve));
    const watcher = await this.kv.watch(
      (entry) => {
        if (entry.operation !== 'PUT') return resumed?.();
        if (!decodeMessage(PausedRecordSchema, entry.value, 'pause state').paused) resumed?.();
      },
      { key: `${runId}.paused` },
    );
    const onAbort = () => resumed?.();
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      if (await this.paused(runId)) await done;
      if (signal.aborted)
        throw new AgentMeshError(ErrorCode.Cancelled, 'stopped waiting while paused', { retryable: false });
    } finally {
      signal.removeEventListener('abort', onAbort);
      watcher.stop();
    }
  }
}

type ControlKind = 'input' | 'pause' | 'resume';

/**
 * Records `runs.<id>.input|pause|resume` in the controls bucket (a queue group of every planner, so any live one
 * records it). Replies `{ ok: true }` when asked with a reply subject (`duplicate: true` for a repeat of a
 * `request_id` already recorded), or a named error: `invalid_message`, `run_finished`.
 */
export function serveRunControls(deps: {
  bus: Bus;
  prefix: string;
  store: RunControlStore;
  records: KvStore;
  logger: Logger;
}): Subscription[] {
  const subjects = runControlSubjects(deps.prefix);
  const head = `${deps.prefix}.runs.`;
  const handle = (kind: ControlKind) => async (msg: BusMessage) => {
    const runId = msg.subject.slice(head.length, -`.${kind}`.length);
    try {
      const { duplicate, requestId } = await recordControl(deps, runId, kind, msg);
      deps.logger.info(
        { run_id: runId, kind, request_id: requestId, duplicate },
        duplicate ? 'run control repeated' : 'run control recorded',
      );
      if (msg.reply !== undefined)
        respondJson(deps.bus, msg, duplicate ? { ok: true, duplicate } : { ok: true });
    } catch (error) {
      deps.logger.warn({ run_id: runId, kind, err: (error as Error).message }, 'run control refused');
      if (msg.reply !== undefined) respondError(deps.bus, msg, error);
    }
  };
  const queue = { queue: 'agentmesh-planners' };
  return [
    deps.bus.subscribe(subjects.allInputs, handle('input'), queue),
    deps.bus.subscribe(subjects.allPauses, handle('pause'), queue),
    deps.bus.subscribe(subjects.allResumes, handle('resume'), queue),
  ];
}

/** Applies one control message, once per `request_id` when it has one. */
async function recordControl(
  deps: { store: RunControlStore; records: KvStore },
  runId: string,
  kind: ControlKind,
  msg: BusMessage,
): Promise<{ duplicate: boolean; requestId: string | undefined }> {
  const input = kind === 'input' ? decodeMessage(RunInputSchema, msg.data, 'run input') : undefined;
  const body =
    input ??
    (msg.data.length === 0 ? {} : decodeMessage(RunControlRequestSchema, msg.data, `${kind} request`));
  const apply = async (claim: Record<string, unknown>): Promise<Record<string, unknown>> => {
    const entry = await deps.records.get(runId);
    if (entry !== null && parseRecord(entry.value).state === 'finished')
      throw new AgentMeshError('run_finished', `run "${runId}" already finished: nothing to ${kind}`, {
        retryable: false,
        details: { run_id: runId },
      });
    if (input !== undefined)
      await deps.store.addInput(runId, input.text, claim['input_key'] as string | undefined);
    else await deps.store.setPaused(runId, kind === 'pause');
    return {};
  };
  const requestId = body.request_id;
  if (requestId === undefined) {
    await apply({});
    return { duplicate: false, requestId };
  }
  const claim = kind === 'input' ? { input_key: deps.store.newInputKey(runId) } : {};
  const { duplicate } = await deps.store.ledger.once(runId, requestId, kind, claim, apply);
  return { duplicate, requestId };
}

/** What {@link sendRunControl} did: whether a planner had recorded its request id before, and the attempts. */
export interface RunControlResult {
  ok: true;
  duplicate?: boolean;
  request_id: string;
  attempts: number;
}

/**
 * Sends input, pause or resume to a run with a `request_id` (generated unless given) and waits until a planner
 * recorded it, sending again on `timeout` or `no_responders` within the deadline (`timeoutMs`, default 10 s).
 */
export async function sendRunControl(
  bus: Bus,
  runId: string,
  control: { kind: 'input'; text: string } | { kind: 'pause' | 'resume' },
  options: ControlSendOptions & { requestId?: string } = {},
): Promise<RunControlResult> {
  const subject = runControlSubject(runId, control.kind, options);
  const request_id = options.requestId ?? newRequestId();
  const body = control.kind === 'input' ? { text: control.text, request_id } : { request_id };
  const { reply, attempts } = await requestControl(bus, subject, body, ControlReplySchema, {
    ...options,
    what: `${control.kind} reply`,
  });
  return { ok: true, ...(reply.duplicate === true ? { duplicate: true } : {}), request_id, attempts };
}
