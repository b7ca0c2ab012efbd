import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';
import type { PlannerDefaults, PlannerOptions, TriggerLimits } from '@agentmesh/planner';
import type { AgentMeshConfig } from './config.js';
import { configuredSkills } from './skills.js';

/** Maps the configuration file (and `--base-url`) onto the planner's options. */
export function plannerOptions(config: AgentMeshConfig, baseUrl?: string): Omit<PlannerOptions, 'bus'> {
  const search = config.tools?.search;
  const skills = configuredSkills(config);
  return {
    providers: {
      ...(config.provider?.name ? { provider: config.provider.name } : {}),
      ...(config.provider?.model ? { model: config.provider.model } : {}),
      ...(baseUrl ? { baseUrl } : {}),
      ...(config.models ? { models: config.models } : {}),
      ...(config.provider?.allowed_base_urls ? { allowedBaseUrls: config.provider.allowed_base_urls } : {}),
    },
    ...redelivery(),
    ...(config.capabilities ? { capabilities: config.capabilities } : {}),
    ...(config.prices ? { prices: config.prices } : {}),
    ...(config.triggers ? { triggers: triggerLimits(config.triggers) } : {}),
    ...(config.tenants ? { tenants: config.tenants } : {}),
    defaults: {
      ...limitDefaults(config.limits),
      ...(search ? { tool_search: search } : {}),
      ...(config.provider?.system ? { system: config.provider.system } : {}),
      ...(config.provider?.system_prompt_override
        ? { system_prompt_override: config.provider.system_prompt_override }
        : {}),
      ...(config.tools?.deferred ? { deferred: config.tools.deferred } : {}),
      ...(config.tools?.always ? { always: config.tools.always } : {}),
      ...(config.approvals ? { approvals: config.approvals } : {}),
      ...(config.guardrails ? { guardrails: config.guardrails } : {}),
      ...(config.sessions ? { sessions: config.sessions } : {}),
      ...(config.subagents ? { subagents: config.subagents } : {}),
      ...(skills.length > 0 ? { skills } : {}),
      ...(config.skill_match ? { skill_match: config.skill_match } : {}),
    },
  };
}

function triggerLimits(t: NonNullable<AgentMeshConfig['triggers']>): TriggerLimits {
  return {
    ...(t.max_pending_per_daemon === undefined ? {} : { maxPendingPerDaemon: t.max_pending_per_daemon }),
    ...(t.max_trigger_bytes === undefined ? {} : { maxTriggerBytes: t.max_trigger_bytes }),
    ...(t.store_max_bytes === undefined ? {} : { storeMaxBytes: t.store_max_bytes }),
  };
}

/** `limits:`: the run limits, and the daemons' lifetime apart from them. */
function limitDefaults(
  limits: AgentMeshConfig['limits'],
): Pick<PlannerDefaults, 'limits' | 'daemon_timeout_ms'> {
  if (limits === undefined) return {};
  const { daemon_timeout_ms: daemonTimeoutMs, ...runLimits } = limits;
  return {
    limits: runLimits,
    ...(daemonTimeoutMs === undefined ? {} : { daemon_timeout_ms: daemonTimeoutMs }),
  };
}

/** `AGENTMESH_REDELIVER_MS`: fast failover, a run redelivered this soon after its planner stops confirming it. */
function redelivery(env: NodeJS.ProcessEnv = process.env): Pick<PlannerOptions, 'durability'> {
  const raw = env['AGENTMESH_REDELIVER_MS'];
  if (raw === undefined || raw.trim() === '') return {};
  const ms = Number(raw);
  if (!Number.isInteger(ms) || ms < 500)
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `AGENTMESH_REDELIVER_MS must be a whole number of milliseconds, at least 500, got "${raw}"`,
    );
  return { durability: { redeliverMs: ms } };
}
