import type { AgentMeshConfig } from './config.js';

/** Maps the configuration file onto the planner's options. */
export function plannerOptions(config: AgentMeshConfig, baseUrl?: string) {
  const search = config.tools?.search;
  return {
    providers: {
      ...(config.provider?.name ? { default: config.provider.name } : {}),
      ...(config.provider?.model ? { model: config.provider.model } : {}),
      ...(baseUrl ? { openai: { baseUrl } } : {}),
    },
    ...(config.capabilities ? { capabilities: config.capabilities } : {}),
    ...(config.prices ? { prices: config.prices } : {}),
    defaults: {
      ...(config.limits ? { limits: config.limits } : {}),
      ...(search?.strategy ? { tool_search: search.strategy } : {}),
      ...(config.tools?.deferred ? { deferred: config.tools.deferred } : {}),
      ...(config.tools?.always ? { always: config.tools.always } : {}),
      ...(search ? { search } : {}),
    },
  };
}
