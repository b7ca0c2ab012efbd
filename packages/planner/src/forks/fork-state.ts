import { AgentMeshError, ErrorCode, type RunEvent, type RunEventOf } from '@agentmesh/protocol';
import type { ChatMessage } from '../model/chat.js';
import type { ForkStart } from '../model/fork.js';

/** Why a seq is not a fork point (`details.reason` of the `invalid_request`). */
export const ForkRefusal = {
  BeyondEnd: 'beyond_end',
  InsideModelTurn: 'inside_model_turn',
  ToolsUnfinished: 'tools_unfinished',
  AfterAnswer: 'after_answer',
  TranscriptMismatch: 'transcript_mismatch',
} as const;
export type ForkRefusal = (typeof ForkRefusal)[keyof typeof ForkRefusal];

/** One model turn of a run as its events tell it. */
interface Turn {
  iteration: number;
  /** The seq of its `llm.request`. */
  request: number;
  response?: RunEventOf<'llm.response'> | undefined;
  /** The seq by which every call of the turn had a result; undefined while one has none. */
  done?: number | undefined;
  /** The seq of the `llm.request` that asked this turn again (after a takeover): this one does not count. */
  redoneAt?: number | undefined;
}

const isResult = (e: RunEvent): e is RunEventOf<'tool.completed'> | RunEventOf<'tool.failed'> =>
  e.type === 'tool.completed' || e.type === 'tool.failed';

/** Events that added a user message to the conversation: an input, a nudge, an output repair. */
const addsUserMessage = (e: RunEvent): boolean =>
  e.type === 'run.input' || (e.type === 'run.notice' && (e.kind === 'nudge' || e.kind === 'output_repair'));

function refusal(reason: ForkRefusal, runId: string, seq: number, message: string): AgentMeshError {
  return new AgentMeshError(ErrorCode.InvalidRequest, message, {
    retryable: false,
    details: { run_id: runId, seq, reason },
  });
}

function doneSeq(events: readonly RunEvent[], response: RunEventOf<'llm.response'>): number | undefined {
  let done = response.seq;
  for (const call of response.tool_calls) {
    const result = events.find((e) => e.seq > response.seq && isResult(e) && e.call_id === call.id);
    if (result === undefined) return undefined;
    done = Math.max(done, result.seq);
  }
  return done;
}

function turnsOf(events: readonly RunEvent[]): Turn[] {
  const turns: Turn[] = [];
  for (const e of events) {
    if (e.type === 'llm.request') {
      const earlier = turns.findLast((t) => t.iteration === e.iteration && t.redoneAt === undefined);
      if (earlier !== undefined) earlier.redoneAt = e.seq;
      turns.push({ iteration: e.iteration, request: e.seq });
    } else if (e.type === 'llm.response') {
      const turn = turns.findLast((t) => t.iteration === e.iteration && t.redoneAt === undefined);
      if (turn !== undefined && turn.response === undefined) turn.response = e;
    }
  }
  for (const t of turns) if (t.response) t.done = doneSeq(events, t.response);
  return turns;
}

/** Refuses a seq inside a model turn, or inside a turn whose tool calls had not all finished. */
function checkTurns(runId: string, turns: readonly Turn[], seq: number): void {
  for (const t of turns) {
    const end = t.redoneAt ?? t.response?.seq ?? Infinity;
    if (seq >= t.request && seq < end)
      throw refusal(
        ForkRefusal.InsideModelTurn,
        runId,
        seq,
        `seq ${seq} lies inside model turn ${t.iteration} of run ${runId} (llm.request at seq ${t.request}, ` +
          `${t.redoneAt !== undefined ? `asked again at seq ${t.redoneAt}` : t.response ? `llm.response at seq ${t.response.seq}` : 'never answered'}): ` +
          `fork at seq ${t.request - 1} or after the turn`,
      );
    const response = t.redoneAt === undefined ? t.response : undefined;
    if (response === undefined || response.tool_calls.length === 0 || seq < response.seq) continue;
    if (t.done !== undefined && seq >= t.done) continue;
    throw refusal(
      ForkRefusal.ToolsUnfinished,
      runId,
      seq,
      `seq ${seq} lies inside model turn ${t.iteration} of run ${runId}, whose tool calls had not all finished ` +
        (t.done === undefined
          ? `(some never did): fork at seq ${t.request - 1} or earlier`
          : `(the last result is seq ${t.done}): fork at seq ${t.done} or later`),
    );
  }
}

/** The index in `messages` where the conversation after `seq` ends (exclusive). */
function cutIndex(
  runId: string,
  messages: readonly ChatMessage[],
  events: readonly RunEvent[],
  turns: readonly Turn[],
  seq: number,
): number {
  const mismatch = (what: string) =>
    refusal(
      ForkRefusal.TranscriptMismatch,
      runId,
      seq,
      `the transcript of run ${runId} does not match its events (${what}): it cannot be forked at seq ${seq}`,
    );
  const answered = turns.filter((t) => t.redoneAt === undefined && t.response !== undefined);
  const assistants = messages.flatMap((m, i) => (m.role === 'assistant' ? [i] : []));
  if (assistants.length < answered.length)
    throw mismatch(`${answered.length} model turns, ${assistants.length} assistant messages`);
  const base = assistants.length - answered.length;
  const k = answered.filter((t) => t.response!.seq <= seq).length;
  const turn = answered[k - 1];
  let from = 0;
  let cut = answered.length > 0 ? assistants[base]! : messages.length;
  if (turn !== undefined) {
    const at = assistants[base + k - 1]!;
    const calls = turn.response!.tool_calls;
    calls.forEach((call, i) => {
      const m = messages[at + 1 + i];
      if (m?.role !== 'tool' || m.call_id !== call.id)
        throw mismatch(`no result message for call ${call.id}`);
    });
    from = turn.done ?? turn.response!.seq;
    cut = at + 1 + calls.length;
  }
  const next = turns.find((t) => t.request > from)?.request ?? Infinity;
  const gap = events.filter((e) => e.seq > from && e.seq < next && addsUserMessage(e));
  const end = turn === undefined ? cut : (assistants[base + k] ?? messages.length);
  const start = turn === undefined ? cut - gap.length : cut;
  const segment = messages.slice(start, end);
  if (start < 0 || segment.length !== gap.length || segment.some((m) => m.role !== 'user'))
    throw mismatch(`${gap.length} added user messages expected after seq ${from}`);
  const taken = gap.filter((e) => e.seq <= seq).length;
  return start + taken;
}

/**
 * Where a run can be forked for sure: before its first model turn (`after_turn: 0`) and after each model turn whose
 * tool calls all finished, at the seq of the turn's last result. Other seqs between turns may work too.
 */
export function forkPoints(events: readonly RunEvent[]): { after_turn: number; seq: number }[] {
  const sorted = [...events].sort((a, b) => a.seq - b.seq);
  const turns = turnsOf(sorted);
  const start = (turns[0]?.request ?? (sorted.at(-1)?.seq ?? 0) + 1) - 1;
  const points = start >= 1 ? [{ after_turn: 0, seq: start }] : [];
  for (const t of turns)
    if (t.redoneAt === undefined && t.response && t.response.tool_calls.length > 0 && t.done !== undefined)
      points.push({ after_turn: t.iteration, seq: t.done });
  return points;
}

/** Deferred tools found and surfaced by searches, artifacts seen and tools succeeded, up to `seq`. */
function toolState(events: readonly RunEvent[], seq: number): Omit<ForkStart, 'from' | 'messages'> {
  const found = new Set<string>();
  const surfaced = new Set<string>();
  const succeeded = new Set<string>();
  let artifacts = false;
  for (const e of events) {
    if (e.seq > seq) break;
    if (e.type === 'tool.search') for (const name of e.results) (e.native ? surfaced : found).add(name);
    if (isResult(e) && e.artifact !== undefined) artifacts = true;
    if (e.type === 'tool.completed' && !e.is_error) succeeded.add(e.name);
  }
  return { found: [...found], surfaced: [...surfaced], artifacts, succeeded: [...succeeded] };
}

/**
 * The state of a run after its event `seq`, for a fork: the conversation up to there, tool results included, and
 * the tools found by then. Allowed at any seq outside a model turn, except inside a turn whose tool calls had not all
 * finished, and where the conversation would end with the model's own answer (nothing left to ask). Refusals are
 * `invalid_request` naming the nearest allowed seq, with `details.reason` one of {@link ForkRefusal}.
 */
export function forkState(
  original: { run_id: string; messages: readonly ChatMessage[]; events: readonly RunEvent[] },
  seq: number,
): ForkStart {
  const runId = original.run_id;
  const events = [...new Map(original.events.map((e) => [e.seq, e])).values()].sort((a, b) => a.seq - b.seq);
  const last = events.at(-1)?.seq ?? 0;
  if (seq > last)
    throw refusal(
      ForkRefusal.BeyondEnd,
      runId,
      seq,
      `seq ${seq} is beyond the events of run ${runId}: its last event is seq ${last}`,
    );
  const turns = turnsOf(events);
  checkTurns(runId, turns, seq);
  const messages = original.messages.slice(0, cutIndex(runId, original.messages, events, turns, seq));
  if (messages.at(-1)?.role === 'assistant')
    throw refusal(
      ForkRefusal.AfterAnswer,
      runId,
      seq,
      `at seq ${seq} the conversation of run ${runId} ends with the model's answer (a turn without tool calls): ` +
        'there is nothing left to ask a model; fork before that turn',
    );
  return { from: { run_id: runId, seq }, messages: structuredClone(messages), ...toolState(events, seq) };
}
