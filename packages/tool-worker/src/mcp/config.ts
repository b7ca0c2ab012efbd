import { z } from 'zod';
import {
  AgentMeshError,
  ErrorCode,
  compileGlobTokens,
  describeZodError,
  type GlobTest,
  type GlobToken,
} from '@agentmesh/protocol';

/** Per-tool overrides for the tools of one MCP server, keyed by a glob over the server's own tool names. */
export const McpToolPolicySchema = z
  .object({
    read_only: z.boolean().optional(),
    needs_confirmation: z.boolean().optional(),
    timeout_ms: z.number().int().min(1).max(3_600_000).optional(),
    /** Extra attempts after the first one (default 0). */
    retries: z.number().int().min(0).max(10).optional(),
  })
  .strict();
export type McpToolPolicy = z.infer<typeof McpToolPolicySchema>;

/** One MCP server: stdio (`command`) or streamable HTTP (`url`). `${ENV}` in url, headers and env is substituted. */
export const McpServerConfigSchema = z
  .object({
    command: z.string().min(1).optional(),
    args: z.array(z.string()).optional(),
    env: z.record(z.string(), z.string()).optional(),
    cwd: z.string().optional(),
    url: z.string().min(1).optional(),
    headers: z.record(z.string(), z.string()).optional(),
    tools: z
      .object({ allow: z.array(z.string()).optional(), deny: z.array(z.string()).optional() })
      .strict()
      .optional(),
    /** Reached through tool_search only (default true). */
    deferred: z.boolean().optional(),
    tool_policies: z.record(z.string(), McpToolPolicySchema).optional(),
    /** How long one connection attempt may take (default 15000 ms). */
    connect_timeout_ms: z.number().int().min(100).optional(),
  })
  .strict()
  .superRefine((server, ctx) => {
    if ((server.command === undefined) === (server.url === undefined))
      ctx.addIssue({
        code: 'custom',
        message: 'needs exactly one of "command" (stdio) or "url" (streamable HTTP)',
      });
    if (server.url !== undefined && (server.args ?? server.env ?? server.cwd) !== undefined)
      ctx.addIssue({
        code: 'custom',
        message: 'args, env and cwd are for stdio servers ("command"), not "url"',
      });
    if (server.command !== undefined && server.headers !== undefined)
      ctx.addIssue({ code: 'custom', message: 'headers are for HTTP servers ("url"), not "command"' });
  });
export type McpServerConfig = z.infer<typeof McpServerConfigSchema>;

/** The `mcp:` section of the configuration file. */
export const McpConfigSchema = z
  .object({ servers: z.record(z.string().regex(/^[A-Za-z0-9_.-]{1,40}$/), McpServerConfigSchema) })
  .strict();
export type McpConfig = z.infer<typeof McpConfigSchema>;

/** Validates an `mcp:` section; problems name the key (`mcp.servers.everything.command: ...`). */
export function parseMcpConfig(raw: unknown): McpConfig {
  const result = McpConfigSchema.safeParse(raw);
  if (!result.success)
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `invalid mcp configuration: ${describeZodError(result.error)}`,
    );
  return result.data;
}

/** Replaces `${NAME}` with the environment variable; a variable that is not set is an error naming it and the server. */
export function substituteEnv(text: string, server: string, env: NodeJS.ProcessEnv = process.env): string {
  return text.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_match, name: string) => {
    const value = env[name];
    if (value === undefined)
      throw new AgentMeshError(
        ErrorCode.InvalidConfig,
        `MCP server "${server}": environment variable ${name} is not set (used as \${${name}})`,
        { details: { server, variable: name } },
      );
    return value;
  });
}

const serverToolGlobs = new Map<string, GlobTest>();

/** `*` any run, `?` any one character, case-insensitive; matched without backtracking. */
function globTest(glob: string): GlobTest {
  let test = serverToolGlobs.get(glob);
  if (test === undefined) {
    const tokens = glob
      .split(/([*?])/)
      .map((part): GlobToken =>
        part === '*'
          ? { kind: 'star' }
          : part === '?'
            ? { kind: 'one', except: '\n' }
            : { kind: 'literal', text: part },
      );
    test = compileGlobTokens(tokens, { caseInsensitive: true });
    if (serverToolGlobs.size >= 1024) serverToolGlobs.clear();
    serverToolGlobs.set(glob, test);
  }
  return test;
}

/** Whether a server's tool (its own name) passes `tools.allow` (default every tool) and `tools.deny`. */
export function isMcpToolSelected(tool: string, server: McpServerConfig): boolean {
  const allow = server.tools?.allow;
  const deny = server.tools?.deny ?? [];
  if (allow !== undefined && !allow.some((g) => globTest(g)(tool))) return false;
  return !deny.some((g) => globTest(g)(tool));
}

/** The policies whose glob matches a tool, merged in the order written (later keys win field by field). */
export function mcpToolPolicy(tool: string, server: McpServerConfig): McpToolPolicy {
  let merged: McpToolPolicy = {};
  for (const [glob, policy] of Object.entries(server.tool_policies ?? {}))
    if (globTest(glob)(tool)) merged = { ...merged, ...policy };
  return merged;
}
