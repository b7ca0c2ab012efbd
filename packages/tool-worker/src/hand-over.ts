import { NOT_COPIED, jsonCopyWithin, type ToolOutcome } from '@agentmesh/protocol';

/** Room for the member names, quotes, numbers and flags of an outcome, beyond its strings and objects. */
const OUTCOME_FRAME_BYTES = 512;

/** The members of an outcome that hold objects: what a copy of it must copy in turn. */
export const OUTCOME_OBJECTS = ['output', 'error', 'artifact'] as const;

/**
 * The outcome to hand over on an in-process bus: a shallow copy whose objects (the output, the error, the artifact
 * ref) are copied with jsonCopy, so that the caller shares nothing with the handler (which may keep and change its
 * output) or with the replays the OnceGuard keeps. Undefined (send the JSON text) when one of them cannot be copied or
 * the whole may exceed `maxBytes` (strings count 6 bytes a character, as jsonCopy counts them).
 */
export function handOverOutcome(outcome: ToolOutcome, maxBytes: number): ToolOutcome | undefined {
  const strings =
    outcome.call_id.length + outcome.tool.length + outcome.worker_id.length + outcome.preview.length;
  const budget = { left: maxBytes - OUTCOME_FRAME_BYTES - 6 * strings };
  const copy = { ...outcome };
  for (const key of OUTCOME_OBJECTS) {
    const member: unknown = outcome[key];
    if (member === undefined) continue;
    const copied = jsonCopyWithin(member, budget);
    if (copied === NOT_COPIED) return undefined;
    (copy as Record<string, unknown>)[key] = copied;
  }
  return budget.left < 0 ? undefined : copy;
}
