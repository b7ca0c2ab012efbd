import type { RunContext } from '../run/context.js';
import type { RunHitl } from '../run/ports.js';
import { applyRunControls } from './apply-controls.js';
import { gateCall, type HitlParts } from './call-gate.js';

/** The human in the loop of one run, as the engine calls it: approvals at the call gate, pause and input controls. */
export function runHitl(parts: HitlParts): RunHitl<RunContext> {
  return {
    gate: (ctx, call) => gateCall(ctx, parts, call),
    applyControls: (ctx) => applyRunControls(ctx, parts),
    inputs: parts.controls,
  };
}
