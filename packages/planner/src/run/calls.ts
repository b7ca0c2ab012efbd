import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';
import type { z } from 'zod';
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

/** The arguments of a call the planner answers itself, parsed; `invalid_arguments` naming the tool and each issue. */
export function parseToolArgs<S extends z.ZodType>(schema: S, args: unknown, name: string): z.output<S> {
  const r = schema.safeParse(args);
  if (r.success) return r.data;
  const issues = r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
  throw new AgentMeshError(ErrorCode.InvalidArguments, `invalid arguments for ${name}: ${issues}`, {
    retryable: false,
  });
}
