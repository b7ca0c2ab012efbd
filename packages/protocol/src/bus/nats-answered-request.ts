import { RequestOne } from '@nats-io/nats-core/internal';

interface RequestOneShape {
  timer?: { cancel(): void };
  deferred: { resolve(value: unknown): void };
  mux: { cancel(request: unknown): void };
}

type Resolver = (this: RequestOneShape, err: Error | null, msg: unknown) => void;

let applied: boolean | undefined;

/** Marks the replacement, so that another copy of this module in the process (two builds, two versions) sees it. */
const REPLACED = Symbol.for('agentmesh.nats-core.answered-request');

/**
 * nats-core 3.x (through 3.4.0, and nats.js main as of 2026-06) ends every answered request by rejecting its
 * already-resolved promise with a new `RequestError("cancelled")`: an Error, stack trace captured, built and dropped
 * after each JetStream publish, KV write, consumer ack confirmation and JetStream API call. Nothing can observe it (a
 * settled promise ignores the rejection), and it was the largest single item on a durable run's path to
 * `run.accepted` (docs/benchmarks.md, "Issue 37, sixth sitting").
 *
 * This ends an answered request with the same steps (timer cancelled, promise resolved, request taken off the
 * connection's reply mux) minus that error. A request that fails or times out takes nats-core's own path. Applied
 * once per process (also when several copies of this module are loaded), and only when nats-core's `RequestOne` still
 * reads as the code it replaces (a later nats-core that changed it is left alone); returns whether the shortcut is in
 * place.
 */
export function endAnsweredRequestsWithoutError(): boolean {
  if (applied !== undefined) return applied;
  const proto = RequestOne.prototype as unknown as { resolver: Resolver; cancel: (err?: Error) => void };
  const original = proto.resolver;
  if ((original as { [REPLACED]?: true })[REPLACED] === true) return (applied = true);
  applied =
    typeof original === 'function' &&
    typeof proto.cancel === 'function' &&
    /this\.deferred\.resolve\(msg\);?\s*}\s*this\.cancel\(\)/.test(original.toString()) &&
    /new [\w.]*RequestError\(["']cancelled["']\)/.test(proto.cancel.toString());
  if (!applied) return false;
  const replacement = function answeredOrOriginal(
    this: RequestOneShape,
    err: Error | null,
    msg: unknown,
  ): void {
    if (err) {
      original.call(this, err, msg);
      return;
    }
    this.timer?.cancel();
    this.deferred.resolve(msg);
    this.mux.cancel(this);
  };
  Object.defineProperty(replacement, REPLACED, { value: true });
  proto.resolver = replacement;
  return true;
}
