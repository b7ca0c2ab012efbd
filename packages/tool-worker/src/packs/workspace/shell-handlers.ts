import { z } from 'zod';
import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';
import { checkArgumentPaths, checkArgv } from './argv-policy.js';
import { planCommand } from './command-plan.js';
import { BoundaryRule, denied } from './errors.js';
import { scrubbedEnvironment } from './env.js';
import type { ResolvedWorkspaceConfig } from './options.js';
import type { CommandHandle, CommandStream } from './process-store.js';
import {
  confirmOrRefuse,
  cutNotice,
  tenantOf,
  throwIfAborted,
  type WorkspaceCallContext,
  type WorkspaceRuntime,
} from './runtime.js';

export const RunCommandInput = z
  .object({
    argv: z
      .array(z.string().max(8192))
      .min(1)
      .max(256)
      .optional()
      .describe(
        'The program and its arguments, one word per element, e.g. ["git", "status"]. No shell runs.',
      ),
    command: z
      .string()
      .min(1)
      .max(8192)
      .optional()
      .describe('A shell command line; only when the workspace allows a shell'),
    cwd: z.string().min(1).max(4096).default('.').describe('Working folder relative to the workspace root'),
    timeout_ms: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('Kill the command after this long (capped by the workspace)'),
    background_after_ms: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe(
        'Return a running handle with the output so far after this long; page it with shell.read_command_output',
      ),
  })
  .strict();
const CommandStatusSchema = z.enum(['running', 'exited', 'timed_out', 'killed', 'failed_to_start']);
export const RunCommandOutput = z.object({
  handle: z.string(),
  status: CommandStatusSchema,
  exit_code: z.number().int().nullable(),
  signal: z.string().nullable(),
  stdout: z.string(),
  stderr: z.string(),
  stdout_bytes: z.number().int(),
  stderr_bytes: z.number().int(),
  elapsed_ms: z.number(),
  notice: z.string().optional(),
});
export type RunCommandArgs = z.output<typeof RunCommandInput>;
export type RunCommandResult = z.output<typeof RunCommandOutput>;

/** The last (or first) `max` bytes of a stream, with a notice when that is not all of it. */
function streamPart(
  handle: CommandHandle,
  stream: CommandStream,
  max: number,
  part: 'head' | 'tail',
): { text: string; notice?: string } {
  const buffer = handle[stream];
  const { data, start } = buffer.read(part === 'tail' ? Math.max(0, buffer.total - max) : 0, max);
  const text = data.toString('utf8');
  if (start === 0 && data.length === buffer.total) return { text };
  const next = part === 'tail' ? 0 : start + data.length;
  return {
    text,
    notice: cutNotice(
      `${stream} cut`,
      data.length,
      buffer.total,
      `read the rest with shell.read_command_output {"handle": "${handle.id}", "stream": "${stream}", "offset": ${next}}`,
    ),
  };
}

/** A command's state and output for the model: each stream capped at `maxBytes` (its tail by default). */
export function commandResult(
  handle: CommandHandle,
  maxBytes: number,
  part: 'head' | 'tail' = 'tail',
): RunCommandResult {
  const out = streamPart(handle, 'stdout', maxBytes, part);
  const err = streamPart(handle, 'stderr', maxBytes, part);
  const notices = [out.notice, err.notice].filter((n): n is string => n !== undefined);
  if (handle.status === 'running') {
    notices.push(
      `still running; read more with shell.read_command_output {"handle": "${handle.id}", "wait_ms": 5000}`,
    );
  } else if (handle.status === 'timed_out') {
    notices.push('the command hit its time limit and was killed');
  } else if (handle.status === 'failed_to_start' && handle.startError !== undefined) {
    notices.push(`the command did not start: ${handle.startError}`);
  }
  const result: RunCommandResult = {
    handle: handle.id,
    status: handle.status,
    exit_code: handle.exitCode,
    signal: handle.signal,
    stdout: out.text,
    stderr: err.text,
    stdout_bytes: handle.stdout.total,
    stderr_bytes: handle.stderr.total,
    elapsed_ms: handle.elapsedMs(),
  };
  if (notices.length > 0) result.notice = notices.join(' ');
  return result;
}

/** Starts a program inside the workspace after every check, and waits for it (or backgrounds it). */
export async function startCommand(
  runtime: WorkspaceRuntime,
  ctx: WorkspaceCallContext,
  spec: { file: string; args: readonly string[]; display: readonly string[]; cwd: string; timeoutMs: number },
  extraEnv: Readonly<Record<string, string>> = {},
): Promise<CommandHandle> {
  const { resolver, config, commands } = runtime;
  await resolver.resolve(spec.cwd, { access: 'write', argument: 'cwd' });
  const { handle: dir, resolved } = await resolver.openDirectory(spec.cwd, 'cwd');
  try {
    throwIfAborted(ctx.signal);
    return await commands.start({
      file: spec.file,
      args: spec.args,
      cwd: resolver.descriptorPath(dir, resolved.real),
      env: { ...scrubbedEnvironment(config.rootReal, config.envAllow), ...extraEnv },
      timeoutMs: spec.timeoutMs,
      tenant: tenantOf(ctx),
      display: spec.display,
    });
  } finally {
    await dir.close();
  }
}

/** Waits for a command to end, for `backgroundAfterMs`, or for the call to be cancelled (which kills it). */
export async function awaitCommand(
  handle: CommandHandle,
  ctx: WorkspaceCallContext,
  backgroundAfterMs?: number,
): Promise<void> {
  if (handle.status !== 'running') return;
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<'aborted'>((resolve) => {
    onAbort = () => resolve('aborted');
    if (ctx.signal.aborted) resolve('aborted');
    else ctx.signal.addEventListener('abort', onAbort, { once: true });
  });
  const background =
    backgroundAfterMs === undefined
      ? new Promise<never>(() => undefined)
      : new Promise<'background'>(
          (resolve) => (timer = setTimeout(() => resolve('background'), backgroundAfterMs)),
        );
  try {
    const outcome = await Promise.race([handle.done.then(() => 'done' as const), aborted, background]);
    if (outcome === 'aborted') {
      handle.kill('killed');
      await handle.done;
      throw new AgentMeshError(
        ErrorCode.Cancelled,
        'the tool call was cancelled and the command was killed',
        { retryable: false },
      );
    }
  } finally {
    if (timer !== undefined) clearTimeout(timer);
    if (onAbort !== undefined) ctx.signal.removeEventListener('abort', onAbort);
  }
}

/** The program to start, its arguments, what to show for it and the environment it adds. */
interface CommandInvocation {
  file: string;
  args: string[];
  display: string[];
  env: Readonly<Record<string, string>>;
}

/** Refuses a call that gives both or neither of argv and command. */
function assertOneCommandForm(args: RunCommandArgs): void {
  if ((args.argv === undefined) === (args.command === undefined)) {
    throw new AgentMeshError(ErrorCode.InvalidArguments, 'give exactly one of argv (preferred) or command', {
      retryable: false,
    });
  }
}

/** The `/bin/sh -c` invocation of a shell command line; refused unless the workspace allows a shell. */
function shellInvocation(config: ResolvedWorkspaceConfig, command: string): CommandInvocation {
  if (!config.allowShell) {
    throw denied(
      BoundaryRule.ShellDisabled,
      'this workspace does not allow shell command lines; pass argv instead, e.g. {"argv": ["ls", "-la"]}',
    );
  }
  return { file: '/bin/sh', args: ['-c', command], display: [command], env: {} };
}

/** Checks argv, its working folder and the paths in its arguments, then returns the planned invocation. */
async function argvInvocation(
  runtime: WorkspaceRuntime,
  argv: string[],
  cwdPath: string,
): Promise<CommandInvocation> {
  const { config, resolver } = runtime;
  checkArgv(config, argv);
  const cwd = await resolver.resolve(cwdPath, { access: 'write', argument: 'cwd' });
  await checkArgumentPaths(resolver, argv.slice(1), cwd.segments);
  const planned = await planCommand(runtime, argv, cwd.segments);
  return { file: argv[0] as string, args: planned.args, display: argv, env: planned.env };
}

/** Refuses a command that did not start, naming the reason it gave. */
function assertStarted(handle: CommandHandle, display: readonly string[]): void {
  if (handle.status === 'failed_to_start') {
    throw new AgentMeshError(
      ErrorCode.NotFound,
      `${JSON.stringify(display).slice(0, 200)} did not start: ${handle.startError ?? 'unknown error'}`,
      {
        retryable: false,
        details: { handle: handle.id },
      },
    );
  }
}

export async function runCommand(
  runtime: WorkspaceRuntime,
  args: RunCommandArgs,
  ctx: WorkspaceCallContext,
): Promise<RunCommandResult> {
  throwIfAborted(ctx.signal);
  const { config } = runtime;
  assertOneCommandForm(args);
  const invocation =
    args.command !== undefined
      ? shellInvocation(config, args.command)
      : await argvInvocation(runtime, args.argv as string[], args.cwd);
  const { display } = invocation;
  const timeoutMs = Math.min(args.timeout_ms ?? config.shellTimeoutMs, config.shellTimeoutMs);
  await confirmOrRefuse(
    runtime,
    ctx,
    'shell.run_command',
    `run ${JSON.stringify(display).slice(0, 400)} in ${args.cwd}`,
    {
      argv: args.argv,
      command: args.command,
      cwd: args.cwd,
    },
  );
  const handle = await startCommand(
    runtime,
    ctx,
    { file: invocation.file, args: invocation.args, display, cwd: args.cwd, timeoutMs },
    invocation.env,
  );
  assertStarted(handle, display);
  await awaitCommand(handle, ctx, args.background_after_ms);
  return commandResult(handle, config.maxOutputBytes);
}

export const ReadCommandOutputInput = z
  .object({
    handle: z.string().min(1).max(100).describe('The handle from shell.run_command'),
    stream: z.enum(['stdout', 'stderr']).default('stdout'),
    offset: z.number().int().min(0).default(0).describe('Byte offset in the stream to read from'),
    max_bytes: z.number().int().min(1).optional(),
    tail: z.boolean().default(false).describe('Read the last max_bytes instead of from offset'),
    wait_ms: z
      .number()
      .int()
      .min(0)
      .max(30_000)
      .default(0)
      .describe('Wait up to this long for new output or the end'),
  })
  .strict();
export const ReadCommandOutputOutput = z.object({
  handle: z.string(),
  status: CommandStatusSchema,
  exit_code: z.number().int().nullable(),
  signal: z.string().nullable(),
  stream: z.enum(['stdout', 'stderr']),
  offset: z.number().int(),
  next_offset: z.number().int(),
  total_bytes: z.number().int(),
  data: z.string(),
  eof: z.boolean(),
  notice: z.string().optional(),
});
export type ReadCommandOutputArgs = z.output<typeof ReadCommandOutputInput>;
export type ReadCommandOutputResult = z.output<typeof ReadCommandOutputOutput>;

export async function readCommandOutput(
  runtime: WorkspaceRuntime,
  args: ReadCommandOutputArgs,
  ctx: WorkspaceCallContext,
): Promise<ReadCommandOutputResult> {
  throwIfAborted(ctx.signal);
  const handle = runtime.commands.get(args.handle, tenantOf(ctx));
  const buffer = handle[args.stream];
  if (args.wait_ms > 0 && handle.status === 'running' && (args.tail || buffer.total <= args.offset)) {
    await handle.waitForChange(args.wait_ms, ctx.signal);
  }
  throwIfAborted(ctx.signal);
  const max = Math.min(args.max_bytes ?? runtime.config.maxReadBytes, runtime.config.maxReadBytes);
  const from = args.tail ? Math.max(0, buffer.total - max) : args.offset;
  const { data, start } = buffer.read(from, max);
  const next = start + data.length;
  const result: ReadCommandOutputResult = {
    handle: handle.id,
    status: handle.status,
    exit_code: handle.exitCode,
    signal: handle.signal,
    stream: args.stream,
    offset: start,
    next_offset: next,
    total_bytes: buffer.total,
    data: data.toString('utf8'),
    eof: handle.status !== 'running' && next >= buffer.total,
  };
  const notices: string[] = [];
  if (start > from)
    notices.push(
      `bytes before offset ${start} were discarded (only the last ${runtime.config.maxCommandBufferBytes} bytes are kept)`,
    );
  if (next < buffer.total) notices.push(`more output follows; read from offset ${next}`);
  if (notices.length > 0) result.notice = notices.join('; ');
  return result;
}
