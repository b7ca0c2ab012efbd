import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';
import { parseCommandArgs, usageOf, type CommandSpec } from './args.js';
import { buildContext, type CommandContext, type Io } from './context.js';
import {
  catalogCommand,
  catalogSpec,
  plannerCommand,
  plannerSpec,
  workerCommand,
  workerSpec,
} from './commands/actors.js';
import { runCommand, runSpec } from './commands/run.js';
import { runsCommand, runsSpec } from './commands/runs.js';
import { statusCommand, statusSpec } from './commands/status.js';
import { toolsCommand, toolsSpec } from './commands/tools.js';
import { mcpCommand, mcpSpec } from './interop/mcp-command.js';
import { a2aCommand, a2aSpec } from './interop/a2a-command.js';

interface Command {
  spec: CommandSpec;
  handler: (ctx: CommandContext) => Promise<number>;
}

/** Every command of the `agentmesh` CLI, with its flags (also used by `--help` and the deploy tests). */
export const COMMANDS: readonly Command[] = [
  { spec: runSpec, handler: runCommand },
  { spec: catalogSpec, handler: catalogCommand },
  { spec: plannerSpec, handler: plannerCommand },
  { spec: workerSpec, handler: workerCommand },
  { spec: toolsSpec, handler: toolsCommand },
  { spec: statusSpec, handler: statusCommand },
  { spec: runsSpec, handler: runsCommand },
  { spec: mcpSpec, handler: mcpCommand },
  { spec: a2aSpec, handler: a2aCommand },
];

export function mainUsage(): string {
  const width = Math.max(...COMMANDS.map((c) => c.spec.name.length));
  return [
    'agentmesh: an actor-based distributed agent runtime',
    '',
    'usage: agentmesh <command> [flags]',
    '',
    'commands:',
    ...COMMANDS.map((c) => `  ${c.spec.name.padEnd(width)}  ${c.spec.summary}`),
    '',
    'Run "agentmesh <command> --help" for the flags of a command.',
  ].join('\n');
}

/** Runs the CLI and returns the exit code: 0 done, 1 a run that did not finish `done`, 2 usage or configuration. */
export async function runCli(argv: string[], io: Io): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    (name === undefined ? io.stderr : io.stdout).write(`${mainUsage()}\n`);
    return name === undefined ? 2 : 0;
  }
  if (name === '--version') {
    io.stdout.write('0.1.0\n');
    return 0;
  }
  const command = COMMANDS.find((c) => c.spec.name === name);
  if (command === undefined) {
    io.stderr.write(`agentmesh: unknown command "${name}"\n\n${mainUsage()}\n`);
    return 2;
  }
  try {
    const args = parseCommandArgs(command.spec, rest);
    if (args.values['help'] === true) {
      io.stdout.write(`${usageOf(command.spec)}\n`);
      return 0;
    }
    const quiet = !['catalog', 'planner', 'worker'].includes(name);
    const ctx = buildContext(args, io, `agentmesh-${name}`, quiet);
    return await command.handler(ctx);
  } catch (error) {
    const e = AgentMeshError.from(error);
    io.stderr.write(`agentmesh ${name}: ${e.message}\n`);
    const usage =
      e.code === ErrorCode.InvalidRequest ||
      e.code === ErrorCode.InvalidConfig ||
      e.code === ErrorCode.Unavailable ||
      e.code === ErrorCode.JetStreamUnavailable;
    return usage ? 2 : 1;
  }
}
