import {
  AgentMeshError,
  ErrorCode,
  decodeMessage,
  encodeJson,
  retry,
  type Backend,
  type BlobStore,
  type RunEvent,
  type ScriptedTurn,
} from '@agentmesh/protocol';
import { z } from 'zod';
import { openRunRecords, openTranscriptStore } from './backend.js';
import { parseRecord, type RunRecord } from '../model/record.js';
import type { RunTranscript } from '../model/transcript.js';
import { assertKnownSchema, SCHEMA_VERSION } from '../model/versions.js';
import type { TranscriptStore } from '../run/ports.js';

export type { RunTranscript } from '../model/transcript.js';

export type { RunRecord } from '../model/record.js';

export { openRunRecords, openTranscriptStore, runsBucket, transcriptsBucket } from './backend.js';

const TranscriptSchema = z.looseObject({
  version: z.literal(1),
  run_id: z.string(),
  messages: z.array(z.unknown()),
  events: z.array(z.unknown()),
});

export async function saveTranscript(store: BlobStore, transcript: RunTranscript): Promise<void> {
  const stored: RunTranscript = { schema_version: SCHEMA_VERSION, ...transcript };
  await store.put(transcript.run_id, encodeJson(stored), {
    mime: 'application/json',
    meta: { planner: transcript.planner_id, status: transcript.status ?? 'failed' },
  });
}

/** The engine's {@link TranscriptStore} over a blob store; undefined when there is none. */
export function transcriptStore(blobs: BlobStore | undefined): TranscriptStore | undefined {
  return blobs === undefined ? undefined : { save: (transcript) => saveTranscript(blobs, transcript) };
}

/** Reads a run's transcript (from any process on the same bus), or null when there is none. */
export async function readTranscript(
  bus: Backend,
  runId: string,
  options: { prefix?: string } = {},
): Promise<RunTranscript | null> {
  const store = await openTranscriptStore(bus, options.prefix);
  const blob = await store.get(runId);
  if (blob === null) return null;
  const transcript = decodeMessage(
    TranscriptSchema,
    blob.data,
    `transcript of run ${runId}`,
  ) as unknown as RunTranscript;
  return assertKnownSchema(`transcript of run ${runId}`, transcript);
}

/** How long a reader waits for the transcript of a run whose final event is stored already. */
const TRANSCRIPT_SETTLE_MS = 10_000;

/**
 * Reads a finished run's transcript with `read`: null when there is none, after waiting a moment when `ended` says
 * the run's final event is stored already but the transcript not yet (its planner saves it just after).
 */
export async function settledTranscript<T>(
  read: () => Promise<T | null>,
  ended: () => Promise<boolean>,
): Promise<T | null> {
  const first = await read();
  if (first !== null || !(await ended())) return first;
  const pending = new AgentMeshError(ErrorCode.NotFound, 'the transcript is not stored yet', {
    retryable: true,
  });
  return retry(
    async () => {
      const transcript = await read();
      if (transcript === null) throw pending;
      return transcript;
    },
    { timeoutMs: TRANSCRIPT_SETTLE_MS, baseMs: 50, capMs: 500 },
  ).catch(() => null);
}

/** Reads the KV record of a run id, or null when no planner saw it. */
export async function readRunRecord(
  bus: Backend,
  runId: string,
  options: { prefix?: string } = {},
): Promise<RunRecord | null> {
  const kv = await openRunRecords(bus, options.prefix);
  const entry = await kv.get(runId);
  return entry === null ? null : parseRecord(entry.value);
}

/**
 * The model turns of a transcript as a script: running the transcript's request again with this script (scripted
 * provider) replays the run against the current tools, turn for turn.
 */
export function transcriptToScript(transcript: Pick<RunTranscript, 'events'>): ScriptedTurn[] {
  const turns: ScriptedTurn[] = [];
  for (const e of transcript.events) {
    if (e.type !== 'llm.response') continue;
    turns.push({
      ...(e.text === '' ? {} : { text: e.text }),
      ...(e.tool_calls.length === 0
        ? {}
        : {
            tool_calls: e.tool_calls.map((c) => ({
              id: c.id,
              name: c.name,
              arguments:
                c.arguments !== null && typeof c.arguments === 'object' && !Array.isArray(c.arguments)
                  ? (c.arguments as Record<string, unknown>)
                  : typeof c.arguments === 'string'
                    ? c.arguments
                    : JSON.stringify(c.arguments),
            })),
          }),
      usage: { input_tokens: e.usage.input_tokens, output_tokens: e.usage.output_tokens },
    });
  }
  return turns;
}

/** Hands a transcript's events to `onEvent` in order (a viewer or the CLI re-rendering a past run). */
export function replayEvents(
  transcript: Pick<RunTranscript, 'events'>,
  onEvent: (event: RunEvent) => void,
): void {
  for (const e of [...transcript.events].sort((a, b) => a.seq - b.seq)) onEvent(e);
}
