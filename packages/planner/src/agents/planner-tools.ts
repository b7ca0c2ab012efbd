import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';
import type { RunContext } from '../run/context.js';
import type { PlannerTools } from '../run/ports.js';
import { agentCall } from './agent-calls.js';
import { isAgentTool } from './agent-tools.js';
import { cancelChildren } from './children.js';

/** The agent.* tools, as the engine calls them: child runs started, steered and, when the run ends, cancelled. */
export const agentTools: PlannerTools<RunContext> = {
  handles: isAgentTool,
  call(ctx, callId, name, args) {
    if (!isAgentTool(name)) throw new AgentMeshError(ErrorCode.NotFound, `${name} is not an agent tool`);
    return agentCall(ctx, callId, name, args);
  },
  runEnded: cancelChildren,
};
