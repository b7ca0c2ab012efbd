import { matchesToolPattern } from '@agentmesh/protocol';
import { AGENT_TOOL_SPECS, offeredAgentTools } from './agents/agent-tools.js';
import { agentTools } from './agents/planner-tools.js';
import { approvalPolicy } from './approval-policy.js';
import type { TenantQuotas } from './budgets/index.js';
import { loadForkStart, type ForkSources } from './forks/index.js';
import { daemonSession, type IdleDaemons, type TriggerQueue } from './daemon/index.js';
import type { ApprovalStore } from './hitl/approval-store.js';
import type { RunControlStore } from './hitl/run-controls.js';
import { runHitl } from './hitl/run-hitl.js';
import { WaitingState } from './hitl/waiting.js';
import { joinRequestedSession } from './hitl/session-hold.js';
import type { SessionStore } from './hitl/session-store.js';
import type { RunContext } from './run/context.js';
import type { RunFeatures } from './run/ports.js';
import type { PlannerDefaults } from './run/setup.js';
import { skillSession } from './skills/index.js';

/** What the features of a planner's runs are made of; the stores are opened by the planner, later than this. */
export interface FeatureDeps {
  defaults: PlannerDefaults;
  /** The approval store when calls may wait for a human decision (undefined: no approvals). */
  approvals?: (() => ApprovalStore | undefined) | undefined;
  /** Where input and pause requests wait for the run (undefined: none). */
  controls?: (() => RunControlStore | undefined) | undefined;
  /** The daemons' trigger queues (daemon runs need it). */
  triggers?: (() => Promise<TriggerQueue>) | undefined;
  /** The planner's idle daemons (a draining planner does not wait for them). */
  idleDaemons?: IdleDaemons | undefined;
  /** The session store (opened on first use). */
  sessions?: (() => Promise<SessionStore>) | undefined;
  /** Tenants' daily budgets (fleets with `tenants:` configured). */
  quotas?: TenantQuotas | undefined;
  /** Where forks read the runs they start from. */
  forks: ForkSources;
}

/**
 * The one place the engine's ports meet their implementations: the agent.* tools, approvals and run controls,
 * skills and daemons of each run a planner drives.
 */
export function runFeatures(deps: FeatureDeps): RunFeatures<RunContext> {
  const { defaults, quotas } = deps;
  return {
    ...(quotas === undefined ? {} : { quota: (request) => quotas.forRun(request) }),
    tools: agentTools,
    offeredTools: (request) => offeredAgentTools(request.tools, defaults.subagents),
    matchesPlannerTool: (pattern) => AGENT_TOOL_SPECS.some((s) => matchesToolPattern(s.name, pattern)),
    hitl(request, recordWaiting) {
      const store = deps.approvals?.();
      if (store === undefined) return undefined;
      return runHitl({
        store,
        policy: approvalPolicy(defaults.approvals, request.approvals),
        waits: new WaitingState(recordWaiting),
        controls: deps.controls?.(),
      });
    },
    skills: (request, snapshot, carried) =>
      skillSession(defaults.skills, defaults.skill_match, request, snapshot, { carried }),
    daemon: (request, snapshot) =>
      daemonSession(request, snapshot, deps.triggers, {
        ...(deps.idleDaemons ? { idle: deps.idleDaemons } : {}),
        ...(defaults.sessions?.max_tokens ? { compactTokens: defaults.sessions.max_tokens } : {}),
      }),
    fork: (request) => loadForkStart(deps.forks, request),
    session: (request, target, signal) => joinRequestedSession(deps.sessions, request, target, signal),
  };
}
