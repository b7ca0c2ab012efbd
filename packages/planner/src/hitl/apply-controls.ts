import type { PendingInput, RunControlStore } from './run-controls.js';
import type { RunContext } from '../run/context.js';
import type { HitlParts } from './call-gate.js';

/**
 * Applies the run's pause and input requests before a model turn: waits while paused (`run.paused`, status
 * `paused`, then `run.resumed`), then adds each pending input as a user message (`run.input`). Applied inputs are
 * checkpointed before they are dropped from the controls bucket, so a resumed run applies each exactly once.
 */
export async function applyRunControls(ctx: RunContext, hitl: HitlParts): Promise<void> {
  const store = hitl.controls;
  if (store === undefined) return;
  const runId = ctx.state.run_id;
  const applied = (ctx.state.controls ??= { applied_inputs: [] });
  const pending = await readControls(ctx, store);
  if (pending === undefined) return;
  if (pending.paused) {
    if (applied.paused !== true) {
      applied.paused = true;
      ctx.sink.emit({ type: 'run.paused' });
      await ctx.checkpoint();
    }
    await hitl.waits.setPaused(true);
    ctx.log.info('run paused');
    try {
      await store.waitUntilResumed(runId, ctx.signal);
    } finally {
      await hitl.waits.setPaused(false);
    }
  }
  if (applied.paused === true) {
    applied.paused = false;
    ctx.sink.emit({ type: 'run.resumed' });
    ctx.log.info('run resumed');
  }
  const inputs = pending.paused ? await store.inputs(runId) : pending.inputs;
  if (inputs.length === 0) {
    if (pending.marked) await store.clearInputMarker(runId);
    return;
  }
  for (const input of inputs) {
    if (applied.applied_inputs.includes(input.key)) continue;
    ctx.state.messages.push({ role: 'user', content: input.text });
    applied.applied_inputs.push(input.key);
    ctx.sink.emit({ type: 'run.input', text: input.text });
  }
  await ctx.checkpoint();
  for (const input of inputs) await store.dropInput(input.key);
  await store.clearInputMarker(runId);
  applied.applied_inputs = applied.applied_inputs.filter((k) => !inputs.some((i) => i.key === k));
}

/**
 * The run's pause flag and pending inputs, or undefined when the controls bucket cannot be read right now (a
 * restarting server): the loop goes on and the requests, kept in the bucket, are applied before a later turn.
 */
async function readControls(
  ctx: RunContext,
  store: RunControlStore,
): Promise<{ paused: boolean; marked: boolean; inputs: PendingInput[] } | undefined> {
  try {
    const runId = ctx.state.run_id;
    if (!(await store.mayHaveControls(runId))) return { paused: false, marked: false, inputs: [] };
    const [paused, marked] = await Promise.all([store.paused(runId), store.hasInputMarker(runId)]);
    return { paused, marked, inputs: marked ? await store.inputs(runId) : [] };
  } catch (error) {
    if (ctx.signal.aborted) throw error;
    ctx.log.warn({ err: (error as Error).message }, 'input and pause requests not read this turn');
    return undefined;
  }
}
