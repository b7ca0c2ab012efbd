import { NOT_COPIED, jsonCopyWithin } from './codec.js';
import type { ToolOutcome } from './schemas.js';

/** Room for the member names, quotes, numbers and flags of an outcome, beyond its strings and objects. */
const OUTCOME_FRAME_BYTES = 512;

/** The members of an outcome that hold objects: what a copy of it must copy in turn. */
export const OUTCOME_OBJECTS = ['output', 'error', 'artifact'] as const;

/**
 * Values made to be handed over on an in-process bus that their receiver has not taken yet, each taken at most once.
 * The latest is held in a slot of its own: a call answered before the next one is handed over (any call at 1 in
 * flight) costs no WeakSet entry, whose add and delete took about 3% of an embedded call.
 */
export class HandOverMarks {
  private last: object | undefined;
  private readonly older = new WeakSet<object>();

  mark(value: object): void {
    if (this.last !== undefined) this.older.add(this.last);
    this.last = value;
  }

  /** Whether `value` was marked and not taken yet; it is forgotten as it is taken. */
  take(value: unknown): boolean {
    if (typeof value !== 'object' || value === null) return false;
    if (value === this.last) {
      this.last = undefined;
      return true;
    }
    return this.older.delete(value);
  }
}

/** The outcomes {@link handOverOutcome} made and no client took yet. */
const handedOver = new HandOverMarks();

/**
 * The outcome to hand over on an in-process bus: a shallow copy whose objects (the output, the error, the artifact
 * ref) are copied with jsonCopy, so that the caller shares nothing with the handler (which may keep and change its
 * output) or with the replays a worker keeps. Undefined (send the JSON text) when one of them cannot be copied or
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
  if (budget.left < 0) return undefined;
  handedOver.mark(copy);
  return copy;
}

/**
 * Whether a reply body is an outcome {@link handOverOutcome} made (once: it is forgotten as it is taken). Such an
 * outcome was built in this process by a worker and copied here, and reached the client only through the in-process
 * bus, so the client takes it as it is; any other reply (JSON text from NATS, a value from anyone else) is checked.
 */
export function takeHandedOverOutcome(value: unknown): value is ToolOutcome {
  return handedOver.take(value);
}
