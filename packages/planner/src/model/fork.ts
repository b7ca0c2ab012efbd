import type { ForkRef } from '@agentmesh/protocol';
import type { ChatMessage } from './chat.js';

/**
 * Where a forked run starts: the original run's conversation after event `from.seq`, and the tool state the
 * conversation had reached there. Rebuilt from the original's stored transcript and events (forks/fork-state.ts).
 */
export interface ForkStart {
  from: ForkRef;
  /** The original's messages up to the fork point, tool results included (a copy the fork may change). */
  messages: ChatMessage[];
  /** Deferred tools a client-side tool_search had found by then (promoted for the fork's first turn). */
  found: string[];
  /** Deferred tools a native provider search had surfaced by then. */
  surfaced: string[];
  /** A tool result had carried an artifact (artifact_fetch is offered). */
  artifacts: boolean;
  /** Canonical names of tools that had succeeded (for require_successful_tools). */
  succeeded: string[];
}
