import { AgentMeshError, ErrorCode } from '@agentmesh/protocol/errors';
import { parseCommandArgs, usageOf } from './args.js';
import { COMMANDS, type Command } from './commands/index.js';
import type { Io } from './context.js';
import { closest } from './suggest.js';
import { telemetryRequested } from './telemetry-env.js';

export { COMMANDS, type Command } from './commands/index.js';

export const VERSION = '0.1.0';

export function mainUsage(): string {
  const width = Math.max(...COMMANDS.map((c) => c.spec.name.length));
  return [
    'agentmesh: an actor-based distributed agent runtime',
    '',
    'usage: agentmesh <command> [flags]',
    '',
    'commands:',
    ...COMMANDS.map(
      (c) => `  ${c.spec.name.padEnd(width)}  ${c.spec.summary.split('. ')[0]!.replace(/\.$/, '')}`,
    ),
    '',
    'Run "agentmesh help <command>" (or "agentmesh <command> --help") for the flags of a command.',
  ].join('\n');
}

function unknownCommand(name: string, io: Io): number {
  const near = closest(
    name,
    COMMANDS.map((c) => c.spec.name),
  );
  io.stderr.write(
    `agentmesh: unknown command "${name}"${near.length > 0 ? ` (did you mean ${near.join(' or ')}?)` : ''}\n\n${mainUsage()}\n`,
  );
  return 2;
}

function help(topic: string | undefined, io: Io): number {
  if (topic === undefined) {
    io.stdout.write(`${mainUsage()}\n`);
    return 0;
  }
  const command = COMMANDS.find((c) => c.spec.name === topic);
  if (command === undefined) return unknownCommand(topic, io);
  io.stdout.write(`${usageOf(command.spec)}\n`);
  return 0;
}

/** Exit 2 for what the user can fix in the command line, configuration or environment; 1 for anything else. */
function exitCodeOf(e: AgentMeshError): number {
  const usage =
    e.code === ErrorCode.InvalidRequest ||
    e.code === ErrorCode.InvalidConfig ||
    e.code === ErrorCode.Unavailable ||
    e.code === ErrorCode.JetStreamUnavailable;
  return usage ? 2 : 1;
}

async function runCommand(command: Command, argv: string[], io: Io): Promise<number> {
  const args = parseCommandArgs(command.spec, argv);
  if (args.values['help'] === true) {
    io.stdout.write(`${usageOf(command.spec)}\n`);
    return 0;
  }
  const { buildContext } = await import('./context.js');
  const ctx = await buildContext(args, io, `agentmesh-${command.spec.name}`, command.actor !== true);
  const telemetry = telemetryRequested()
    ? (await import('./telemetry.js')).startTelemetry({ command: command.spec.name })
    : undefined;
  try {
    return await command.handler(ctx);
  } finally {
    await telemetry?.shutdown();
  }
}

/** Runs the CLI and returns the exit code: 0 done, 1 a run that did not finish `done`, 2 usage or configuration. */
export async function runCli(argv: string[], io: Io): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined) {
    io.stderr.write(`${mainUsage()}\n`);
    return 2;
  }
  if (name === '--help' || name === '-h' || name === 'help') return help(rest[0], io);
  if (name === '--version' || name === '-V' || name === 'version') {
    io.stdout.write(`${VERSION}\n`);
    return 0;
  }
  const command = COMMANDS.find((c) => c.spec.name === name);
  if (command === undefined) return unknownCommand(name, io);
  try {
    return await runCommand(command, rest, io);
  } catch (error) {
    const e = AgentMeshError.from(error);
    io.stderr.write(`agentmesh ${name}: ${e.message}\n`);
    return exitCodeOf(e);
  }
}
