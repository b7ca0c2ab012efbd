import type { CommandSpec } from '../args.js';
import type { CommandContext } from '../context.js';
import {
  catalogCommand,
  catalogSpec,
  plannerCommand,
  plannerSpec,
  workerCommand,
  workerSpec,
} from './actors.js';
import { completionCommand, completionSpec } from './completion.js';
import { consoleCommand, consoleSpec } from './console.js';
import { gatewayCommand, gatewaySpec } from './gateway.js';
import { a2aCommand, a2aSpec } from '../interop/a2a-command.js';
import { mcpCommand, mcpSpec } from '../interop/mcp-command.js';
import { runCommand, runSpec } from './run.js';
import { runsCommand, runsSpec } from './runs.js';
import { sessionsCommand, sessionsSpec } from './sessions.js';
import { skillsCommand, skillsSpec } from './skills.js';
import { statusCommand, statusSpec } from './status.js';
import { toolsCommand, toolsSpec } from './tools.js';

/** One `agentmesh` command: its spec (flags, usage, help, completion, docs) and what it does. */
export interface Command {
  spec: CommandSpec;
  handler: (ctx: CommandContext) => Promise<number>;
  /** Long-running actors log at info; other commands only warn and keep the terminal for their output. */
  actor?: boolean;
}

/**
 * Every command, in the order help lists them. Adding a command: write `commands/NAME.ts` exporting its spec and
 * handler, add one line here, and run `npm run docs -w @agentmesh/cli` to add its section to docs/cli.md.
 */
export const COMMANDS: readonly Command[] = [
  { spec: runSpec, handler: runCommand },
  { spec: catalogSpec, handler: catalogCommand, actor: true },
  { spec: plannerSpec, handler: plannerCommand, actor: true },
  { spec: workerSpec, handler: workerCommand, actor: true },
  { spec: toolsSpec, handler: toolsCommand },
  { spec: statusSpec, handler: statusCommand },
  { spec: runsSpec, handler: runsCommand },
  { spec: sessionsSpec, handler: sessionsCommand },
  { spec: consoleSpec, handler: consoleCommand },
  { spec: gatewaySpec, handler: gatewayCommand, actor: true },
  { spec: mcpSpec, handler: mcpCommand },
  { spec: a2aSpec, handler: a2aCommand },
  { spec: skillsSpec, handler: skillsCommand },
  {
    spec: completionSpec,
    handler: (ctx) =>
      completionCommand(
        ctx,
        COMMANDS.map((c) => c.spec),
      ),
  },
];
