import {
  decodeMessage,
  encodeJson,
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
