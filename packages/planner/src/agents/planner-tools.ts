import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';
import type { RunContext } from '../run/context.js';
import type { PlannerTools } from '../run/ports.js';
import { agentCall } from './agent-calls.js';
import { isAgentTool } from './agent-tools.js';
import { cancelChildren, type ChildRuns } from './children.js';

/**
 * The agent.* tools of one run, as the engine calls them: child runs started, steered and, when the run ends,
 * cancelled. What the run holds of its children in this process lives here, with the run.
 */
export function agentTools(): PlannerTools<RunContext> {
  const runs: ChildRuns = {};
  return {
    handles: isAgentTool,
    call(ctx, callId, name, args) {
      if (!isAgentTool(name)) throw new AgentMeshError(ErrorCode.NotFound, `${name} is not an agent tool`);
      return agentCall(ctx, runs, callId, name, args);
    },
    runEnded: (ctx) => cancelChildren(ctx),
  };
}
