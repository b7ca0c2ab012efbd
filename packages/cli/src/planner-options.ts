import type { PlannerOptions } from '@agentmesh/planner';
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
    },
    ...(config.capabilities ? { capabilities: config.capabilities } : {}),
    ...(config.prices ? { prices: config.prices } : {}),
    defaults: {
      ...(config.limits ? { limits: config.limits } : {}),
      ...(search ? { tool_search: search } : {}),
      ...(config.provider?.system ? { system: config.provider.system } : {}),
      ...(config.tools?.deferred ? { deferred: config.tools.deferred } : {}),
      ...(config.tools?.always ? { always: config.tools.always } : {}),
      ...(skills.length > 0 ? { skills } : {}),
      ...(config.skill_match ? { skill_match: config.skill_match } : {}),
    },
  };
}
