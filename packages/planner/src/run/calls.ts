import type { AgentMeshError } from '@agentmesh/protocol';
import type { ChatToolCall } from '../providers/types.js';

/** One tool call of a model turn, its name made canonical and its arguments parsed (or the problem with them). */
export interface PreparedCall {
  index: number;
  call: ChatToolCall;
  name: string;
  args: unknown;
  problem?: AgentMeshError;
}

/** What a call gives back to the model. */
export interface CallResult {
  content: string;
  isError: boolean;
  succeeded: boolean;
}
