import {
  AgentMeshError,
  ErrorCode,
  TERMINAL_EVENT_TYPES,
  decodeMessage,
  type BlobStore,
  type RunEvent,
  type RunRequest,
} from '@agentmesh/protocol';
import { z } from 'zod';
import type { ChatMessage } from '../model/chat.js';
import type { ForkStart } from '../model/fork.js';
import { forkState } from './fork-state.js';
import { settledTranscript } from '../infra/transcripts.js';

export { ForkRefusal, forkPoints, forkState } from './fork-state.js';

/** Where a planner reads the runs it forks: the transcript store and the event log. */
export interface ForkSources {
  transcripts: () => Promise<BlobStore>;
  /** A run's stored events (an empty list where there is no event log). */
  events: (runId: string) => Promise<RunEvent[]>;
}

const StoredTranscriptSchema = z.looseObject({
  run_id: z.string(),
  request: z.unknown(),
  messages: z.array(z.unknown()),
  events: z.array(z.looseObject({ seq: z.number().int(), type: z.string() })),
});

const tenantOf = (request: unknown): string => {
  const identity = (request as { identity?: { tenant?: unknown } } | null)?.identity;
  return typeof identity?.tenant === 'string' ? identity.tenant : 'default';
};

function invalid(message: string): AgentMeshError {
  return new AgentMeshError(ErrorCode.InvalidRequest, message, { retryable: false });
}

/** What a fork request may not combine with `fork`: a session, a parent, a daemon. */
function checkForkRequest(request: RunRequest): void {
  const from = request.fork!.run_id;
  if (request.session !== undefined || request.identity?.session !== undefined)
    throw invalid(
      `a fork of run ${from} cannot continue a session: its conversation is the original's; drop "session"`,
    );
  if (request.parent !== undefined)
    throw invalid(`a fork of run ${from} cannot be a child run: drop "parent"`);
  if (request.daemon !== undefined) throw invalid(`a fork of run ${from} cannot be a daemon: drop "daemon"`);
}

/**
 * The state a forked run starts from: the original's stored transcript (its conversation) and events, cut after
 * `request.fork.seq` (see {@link forkState}). Only a finished run of the request's own tenant can be forked: any
 * other, like one whose transcript is gone, is `not_found` with the same message, so a fork reveals nothing of
 * another tenant's runs. Undefined for a request that is not a fork.
 */
export async function loadForkStart(
  sources: ForkSources,
  request: RunRequest,
): Promise<ForkStart | undefined> {
  const fork = request.fork;
  if (fork === undefined) return undefined;
  checkForkRequest(request);
  const gone = new AgentMeshError(
    ErrorCode.NotFound,
    `run ${fork.run_id} has no stored transcript (it is unknown, still running, or its transcript expired): ` +
      'only a finished run can be forked',
    { retryable: false, details: { run_id: fork.run_id } },
  );
  const store = await sources.transcripts();
  const blob = await settledTranscript(
    () => store.get(fork.run_id),
    async () => (await sources.events(fork.run_id)).some((e) => TERMINAL_EVENT_TYPES.has(e.type)),
  );
  if (blob === null) throw gone;
  const stored = decodeMessage(StoredTranscriptSchema, blob.data, `transcript of run ${fork.run_id}`);
  if (tenantOf(stored.request) !== (request.identity?.tenant ?? 'default')) throw gone;
  if ((stored.request as { daemon?: unknown } | null)?.daemon !== undefined)
    throw invalid(
      `run ${fork.run_id} is a daemon (its conversation is compacted as it goes): it cannot be forked`,
    );
  const logged = await sources.events(fork.run_id);
  const events = [...(stored.events as unknown as RunEvent[])];
  const seen = new Set(events.map((e) => e.seq));
  for (const e of logged) if (!seen.has(e.seq)) events.push(e);
  return forkState({ run_id: fork.run_id, messages: stored.messages as ChatMessage[], events }, fork.seq);
}
