import type { RunLimits } from '@agentmesh/protocol';

/** A limit a request asked to raise above the planner's ceiling, held at the ceiling. */
export interface ClampedLimit {
  field: keyof RunLimits;
  requested: number;
  ceiling: number;
}

/** The limits a run gets, and which of the request's were held at the planner's ceilings. */
export interface EffectiveLimits {
  limits: RunLimits;
  clamped: ClampedLimit[];
}
