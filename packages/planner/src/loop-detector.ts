import { stableStringify } from './util.js';
import type { LoopState } from './model/snapshot.js';

export type { LoopState } from './model/snapshot.js';

export interface LoopThresholds {
  /** Identical consecutive calls before a hint is appended to the result (default 2). */
  warn: number;
  /** ... before the result is replaced by a hard redirect (default 3). */
  block: number;
  /** ... before the call is not executed at all (default 4). */
  skip: number;
}

export const DEFAULT_LOOP_THRESHOLDS: LoopThresholds = { warn: 2, block: 3, skip: 4 };

export type LoopVerdict = { action: 'run' | 'warn' | 'block' | 'skip'; count: number };

/** Counts identical consecutive tool calls (same name, same arguments) across the turns of a run. */
export class LoopDetector {
  constructor(
    readonly state: LoopState = { signature: undefined, count: 0 },
    private readonly thresholds: LoopThresholds = DEFAULT_LOOP_THRESHOLDS,
  ) {}

  observe(name: string, args: unknown): LoopVerdict {
    const signature = `${name}\u0000${stableStringify(args)}`;
    if (signature === this.state.signature) this.state.count++;
    else {
      this.state.signature = signature;
      this.state.count = 1;
    }
    const count = this.state.count;
    const t = this.thresholds;
    const action = count >= t.skip ? 'skip' : count >= t.block ? 'block' : count >= t.warn ? 'warn' : 'run';
    return { action, count };
  }
}

export function loopHint(name: string, count: number): string {
  return `[agentmesh] You have called ${name} with identical arguments ${count} times in a row; the result will not change. Use the result you have or try a different approach.`;
}

export function loopRedirect(name: string, count: number, executed: boolean): string {
  return `[agentmesh] Repeated identical call blocked: ${name} was called with the same arguments ${count} times in a row${
    executed ? '' : ' and was not executed this time'
  }. Do not repeat this call; change the arguments, use another tool, or answer with what you have.`;
}
