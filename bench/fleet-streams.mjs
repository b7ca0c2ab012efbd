// The JetStream streams a bench's planner fleet leaves under its prefix, deleted when the bench is done.
import { streamNames } from '@agentmesh/protocol';
import { checkpointsBucket, runsBucket, tenantWaitingBucket, transcriptsBucket } from '@agentmesh/planner';

/** Deletes the run intake, events, run records, checkpoints, waiting-runs and transcripts streams of `prefix`. */
export async function deleteFleetStreams(bus, prefix) {
  const jsm = await bus.jetstreamManager();
  const names = streamNames(prefix);
  for (const stream of [
    names.runs,
    names.events,
    `KV_${runsBucket(prefix)}`,
    `KV_${checkpointsBucket(prefix)}`,
    `KV_${tenantWaitingBucket(prefix)}`,
    `OBJ_${transcriptsBucket(prefix)}`,
  ])
    await jsm.streams.delete(stream).catch(() => undefined);
}
