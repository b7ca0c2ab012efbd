import type { CommandSpec } from '../args.js';
import type { CommandContext } from '../context.js';
import { a2aSpec } from '../specs/a2a.js';
import { catalogSpec, plannerSpec, workerSpec } from '../specs/actors.js';
import { completionSpec } from '../specs/completion.js';
import { consoleSpec } from '../specs/console.js';
import { evalSpec } from '../specs/eval.js';
import { gatewaySpec } from '../specs/gateway.js';
import { mcpSpec } from '../specs/mcp.js';
import { runSpec } from '../specs/run.js';
import { runsSpec } from '../specs/runs.js';
import { sessionsSpec } from '../specs/sessions.js';
import { skillsSpec } from '../specs/skills.js';
import { statusSpec } from '../specs/status.js';
import { tenantsSpec } from '../specs/tenants.js';
import { toolsSpec } from '../specs/tools.js';

/** One `agentmesh` command: its spec (flags, usage, help, completion, docs) and what it does. */
export interface Command {
  spec: CommandSpec;
  handler: (ctx: CommandContext) => Promise<number>;
  /** Long-running actors log at info; other commands only warn and keep the terminal for their output. */
  actor?: boolean;
}

/**
 * Every command, in the order help lists them. A spec is plain data (`specs/NAME.ts`) and its handler is imported
 * only when the command runs, so `agentmesh --help` and one command load none of the others' modules (the SDKs of
 * providers, MCP, A2A, OpenTelemetry). Adding a command: write its spec in `specs/NAME.ts` and its handler in
 * `commands/NAME.ts`, add one line here, and run `npm run docs -w @agentmesh/cli` to add its section to docs/cli.md.
 */
export const COMMANDS: readonly Command[] = [
  { spec: runSpec, handler: async (ctx) => (await import('./run.js')).runCommand(ctx) },
  {
    spec: catalogSpec,
    handler: async (ctx) => (await import('./actors.js')).catalogCommand(ctx),
    actor: true,
  },
  {
    spec: plannerSpec,
    handler: async (ctx) => (await import('./actors.js')).plannerCommand(ctx),
    actor: true,
  },
  { spec: workerSpec, handler: async (ctx) => (await import('./actors.js')).workerCommand(ctx), actor: true },
  { spec: toolsSpec, handler: async (ctx) => (await import('./tools.js')).toolsCommand(ctx) },
  { spec: statusSpec, handler: async (ctx) => (await import('./status.js')).statusCommand(ctx) },
  { spec: runsSpec, handler: async (ctx) => (await import('./runs.js')).runsCommand(ctx) },
  { spec: evalSpec, handler: async (ctx) => (await import('./eval.js')).evalCommand(ctx) },
  { spec: sessionsSpec, handler: async (ctx) => (await import('./sessions.js')).sessionsCommand(ctx) },
  { spec: consoleSpec, handler: async (ctx) => (await import('./console.js')).consoleCommand(ctx) },
  {
    spec: gatewaySpec,
    handler: async (ctx) => (await import('./gateway.js')).gatewayCommand(ctx),
    actor: true,
  },
  { spec: mcpSpec, handler: async (ctx) => (await import('../interop/mcp-command.js')).mcpCommand(ctx) },
  { spec: a2aSpec, handler: async (ctx) => (await import('../interop/a2a-command.js')).a2aCommand(ctx) },
  { spec: skillsSpec, handler: async (ctx) => (await import('./skills.js')).skillsCommand(ctx) },
  { spec: tenantsSpec, handler: async (ctx) => (await import('./tenants.js')).tenantsCommand(ctx) },
  {
    spec: completionSpec,
    handler: async (ctx) =>
      (await import('./completion.js')).completionCommand(
        ctx,
        COMMANDS.map((c) => c.spec),
      ),
  },
];
