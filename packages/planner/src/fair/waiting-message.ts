import type { Subjects, WorkQueue } from '@agentmesh/protocol';

/** Messages of one tenant queue subject a cancel looks at, from the run's submission on, before it gives up. */
export const MAX_LOOKS = 500;

/** What a cancel knows of a waiting run from its `run.queued` event. */
export interface WaitingPlace {
  tenant: string;
  priority: number;
  /** The run's submission in the runs stream (`run.queued.submit_seq`); absent on older events. */
  submitSeq: number | undefined;
}

/**
 * Deletes the message a cancelled waiting run waits as (`queued.<tenant>.<priority>`, or `queued.<tenant>.admitted`
 * once a capped tenant's run was promoted), so its tenant's queue stops counting it at once. It looks only after
 * the run's submission and deletes only a message on those subjects whose request carries the run's id: a stale or
 * wrong sequence never removes another run. True when a message was deleted; false when none was found (an older
 * event without `submit_seq`, or a planner took the message already).
 */
export async function removeWaitingMessage(
  queue: WorkQueue,
  subjects: Subjects,
  runId: string,
  place: WaitingPlace,
): Promise<boolean> {
  if (place.submitSeq === undefined) return false;
  const options = { fromSeq: place.submitSeq, maxLooks: MAX_LOOKS, matches: isRun(runId) };
  let removed = false;
  for (const stage of [place.priority, 'admitted'] as const)
    if (await queue.remove(subjects.queuedRuns(place.tenant, stage), options)) removed = true;
  return removed;
}

const decoder = new TextDecoder();

function isRun(runId: string): (message: { data: Uint8Array }) => boolean {
  return ({ data }) => {
    try {
      const request = JSON.parse(decoder.decode(data)) as { id?: unknown } | null;
      return typeof request === 'object' && request !== null && request.id === runId;
    } catch {
      return false;
    }
  };
}
