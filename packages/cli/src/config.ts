import { readFileSync } from 'node:fs';
import { parseYaml } from './yaml.js';
import { z } from 'zod';
import {
  AgentMeshError,
  ErrorCode,
  GuardrailsSchema,
  ProviderKindSchema,
  RunApprovalsSchema,
  PartialRunLimitsSchema,
  SearchStrategySchema,
  TenantsConfigSchema,
  ToolSearchStrategySchema,
  describeZodError,
} from '@agentmesh/protocol';
import {
  CapabilityRuleSchema,
  ModelsConfigSchema,
  PriceSchema,
  SkillMatchSchema,
  SkillSchema,
} from '@agentmesh/planner';
import { McpConfigSchema } from '@agentmesh/tool-worker';

export { configPath } from './config-path.js';

/** The configuration file (`--config FILE`, `agentmesh.yaml`, or AGENTMESH_CONFIG). Unknown keys are errors. */
export const ConfigSchema = z
  .object({
    tools: z
      .object({
        deferred: z.array(z.string()).optional(),
        always: z.array(z.string()).optional(),
        allow: z.array(z.string()).optional(),
        packs: z.array(z.enum(['builtin', 'workspace'])).optional(),
        search: z
          .object({
            strategy: ToolSearchStrategySchema.optional(),
            limit: z.number().int().min(1).max(50).optional(),
            budget_tokens: z.number().int().min(0).optional(),
            include_stub_listing: z.boolean().optional(),
          })
          .strict()
          .optional(),
      })
      .strict()
      .optional(),
    workspace: z
      .object({
        root: z.string().optional(),
        protected: z.array(z.string()).optional(),
        protected_writes: z.array(z.string()).optional(),
        denylist: z.array(z.string()).optional(),
        allow_argv_prefixes: z.array(z.array(z.string()).min(1)).optional(),
        allow_shell: z.boolean().optional(),
        shell_timeout_ms: z.number().int().min(1).max(600_000).optional(),
        env_allow: z.array(z.string()).optional(),
        max_read_bytes: z.number().int().min(1).optional(),
        max_write_bytes: z.number().int().min(1).optional(),
        max_output_bytes: z.number().int().min(1).optional(),
        max_command_buffer_bytes: z.number().int().min(1).optional(),
        max_running_commands: z.number().int().min(1).optional(),
        max_kept_handles: z.number().int().min(1).optional(),
        max_search_file_bytes: z.number().int().min(1).optional(),
        max_visited_entries: z.number().int().min(1).optional(),
      })
      .strict()
      .optional(),
    /** Every run's limits: defaults and ceilings (a request may lower each, never raise one). */
    limits: PartialRunLimitsSchema.extend({
      /** How long a daemon run lives at most, and by default (default one day). */
      daemon_timeout_ms: z
        .number()
        .int()
        .min(1)
        .max(2 ** 31 - 1)
        .optional(),
    })
      .strict()
      .optional(),
    provider: z
      .object({
        name: ProviderKindSchema.optional(),
        model: z.string().optional(),
        base_url: z.string().url().optional(),
        system: z.string().optional(),
        /** What a run's `system` does to `system`: add to it (default), replace it, or refuse the run. */
        system_prompt_override: z.enum(['append', 'replace', 'refuse']).optional(),
        /** Base URLs a run's `base_url` may name besides the configured ones (default: none). */
        allowed_base_urls: z.array(z.string().url()).optional(),
      })
      .strict()
      .optional(),
    capabilities: z.array(CapabilityRuleSchema).optional(),
    prices: z.record(z.string(), PriceSchema).optional(),
    models: ModelsConfigSchema.optional(),
    nats: z
      .object({
        url: z.string().optional(),
        prefix: z.string().optional(),
        replicas: z.number().int().min(1).max(5).optional(),
      })
      .strict()
      .optional(),
    catalog: z
      .object({
        worker_ttl_ms: z.number().int().min(500).optional(),
        search_strategy: SearchStrategySchema.optional(),
        /** Worker roles -> the tool namespaces each may register (`*`: any); see `agentmesh catalog --roles`. */
        roles: z.record(z.string(), z.array(z.string())).optional(),
      })
      .strict()
      .optional(),
    /** Planner limits on daemon trigger queues (docs/daemons.md): per-daemon quota, trigger size, bucket bytes. */
    triggers: z
      .object({
        max_pending_per_daemon: z.number().int().min(1).optional(),
        max_trigger_bytes: z.number().int().min(64).optional(),
        store_max_bytes: z.number().int().min(1024).optional(),
      })
      .strict()
      .optional(),
    mcp: McpConfigSchema.optional(),
    /** Per-tenant limits of a shared fleet (docs/tenancy.md): concurrency, queue, rate, daily budgets, weight. */
    tenants: TenantsConfigSchema.optional(),
    /** Which tool calls wait for a human decision (globs); a run request can add requirements, never remove them. */
    approvals: RunApprovalsSchema.optional(),
    /** Guardrails (docs/guardrails.md): input, output and tool rules; a run request can add rules, never remove them. */
    guardrails: GuardrailsSchema.optional(),
    /** Conversations: compact a session's transcript past `max_tokens` (an estimate, characters / 4). */
    sessions: z
      .object({ max_tokens: z.number().int().min(100).optional() })
      .strict()
      .optional(),
    subagents: z
      .object({
        enabled: z.boolean().optional(),
        max_depth: z.number().int().min(0).max(16).optional(),
        max_children: z.number().int().min(0).max(1000).optional(),
      })
      .strict()
      .optional(),
    /** Skills: a list, or `{dirs: [...], list: [...]}` with skill files (YAML or Markdown with front matter). */
    skills: z
      .union([
        z.array(SkillSchema),
        z
          .object({ dirs: z.array(z.string().min(1)).optional(), list: z.array(SkillSchema).optional() })
          .strict(),
      ])
      .optional(),
    skill_match: SkillMatchSchema.optional(),
    /** `agentmesh gateway` (docs/gateway.md): API keys -> tenants, from a file or AGENTMESH_GATEWAY_KEYS too. */
    gateway: z
      .object({
        api_keys: z.record(z.string(), z.string().min(1).max(128)).optional(),
        api_keys_file: z.string().min(1).optional(),
        cors_origins: z.array(z.string().min(1)).optional(),
      })
      .strict()
      .optional(),
  })
  .strict();
export type AgentMeshConfig = z.infer<typeof ConfigSchema>;

/** Loads and validates the configuration; every problem names the key (`tools.search.limit: ...`). */
export function loadConfig(path: string | undefined): AgentMeshConfig {
  if (path === undefined) return {};
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `cannot read configuration file ${path}: ${(error as Error).message}`,
    );
  }
  let raw: unknown;
  try {
    raw = parseYaml(text) ?? {};
  } catch (error) {
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `configuration file ${path} is not valid YAML: ${(error as Error).message}`,
    );
  }
  const result = ConfigSchema.safeParse(raw);
  if (!result.success)
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `invalid configuration in ${path}: ${describeZodError(result.error)}`,
    );
  return result.data;
}
