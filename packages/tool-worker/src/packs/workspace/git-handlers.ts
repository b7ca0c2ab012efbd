import { z } from 'zod';
import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';
import { checkArgumentPaths } from './argv-policy.js';
import { BoundaryRule, denied, quote } from './errors.js';
import {
  checkEmbeddedPaths,
  checkGitArgs,
  GIT_HARDENING_ARGS,
  GIT_HARDENING_ENV,
  GIT_READ_SUBCOMMANDS,
  gitSubcommandHardening,
  gitPathspec,
} from './git-options.js';
import { commandResult, awaitCommand, startCommand } from './shell-handlers.js';
import { throwIfAborted, type WorkspaceCallContext, type WorkspaceRuntime } from './runtime.js';

export const GitInspectInput = z
  .object({
    subcommand: z.enum(GIT_READ_SUBCOMMANDS).describe('status, log, diff, show or blame (read-only)'),
    args: z
      .array(z.string().min(1).max(512))
      .max(64)
      .default([])
      .describe('Options and revisions, e.g. ["--oneline", "-n", "5"] or ["HEAD~1", "HEAD"]'),
    paths: z
      .array(z.string().min(1).max(4096))
      .max(64)
      .default([])
      .describe('Files or folders to limit to, relative to the workspace root'),
  })
  .strict();
export const GitInspectOutput = z.object({
  subcommand: z.enum(GIT_READ_SUBCOMMANDS),
  exit_code: z.number().int().nullable(),
  stdout: z.string(),
  stderr: z.string(),
  handle: z.string(),
  notice: z.string().optional(),
});
export type GitInspectArgs = z.output<typeof GitInspectInput>;
export type GitInspectResult = z.output<typeof GitInspectOutput>;

/** Checks the subcommand, its arguments and paths against the workspace rules; returns the workspace-relative paths. */
async function checkInspectRequest(runtime: WorkspaceRuntime, args: GitInspectArgs): Promise<string[]> {
  const subcommand = args.subcommand as string;
  if (!(GIT_READ_SUBCOMMANDS as readonly string[]).includes(subcommand)) {
    throw denied(
      BoundaryRule.GitSubcommand,
      `git ${quote(subcommand)} is not allowed: git.inspect only runs the read-only subcommands ${GIT_READ_SUBCOMMANDS.join(', ')}`,
      { subcommand },
    );
  }
  const positional = checkGitArgs(args.subcommand, args.args);
  await checkArgumentPaths(runtime.resolver, positional, []);
  checkEmbeddedPaths(runtime.config, args.args);
  const paths: string[] = [];
  for (const path of args.paths) {
    const resolved = await runtime.resolver.resolve(path, {
      access: 'read',
      argument: 'paths',
      mustExist: false,
    });
    paths.push(resolved.relative);
  }
  return paths;
}

function inspectArgv(runtime: WorkspaceRuntime, args: GitInspectArgs, paths: string[]): string[] {
  const subcommand = args.subcommand as string;
  const pathspec = gitPathspec(runtime.config, args.subcommand, args.args, paths, '.');
  return [
    ...GIT_HARDENING_ARGS,
    subcommand,
    ...gitSubcommandHardening(subcommand),
    ...args.args,
    ...(pathspec.length > 0 ? ['--', ...pathspec] : []),
  ];
}

export async function gitInspect(
  runtime: WorkspaceRuntime,
  args: GitInspectArgs,
  ctx: WorkspaceCallContext,
): Promise<GitInspectResult> {
  throwIfAborted(ctx.signal);
  const subcommand = args.subcommand as string;
  const paths = await checkInspectRequest(runtime, args);
  const gitArgs = inspectArgv(runtime, args, paths);
  const handle = await startCommand(
    runtime,
    ctx,
    {
      file: 'git',
      args: gitArgs,
      display: ['git', subcommand, ...args.args, ...paths],
      cwd: '.',
      timeoutMs: runtime.config.shellTimeoutMs,
    },
    GIT_HARDENING_ENV,
  );
  if (handle.status === 'failed_to_start') {
    throw new AgentMeshError(
      ErrorCode.Unavailable,
      `git did not start: ${handle.startError ?? 'unknown error'}`,
      { retryable: false },
    );
  }
  await awaitCommand(handle, ctx);
  const result = commandResult(handle, runtime.config.maxReadBytes, 'head');
  if (handle.exitCode !== 0 && /not a git repository/i.test(result.stderr)) {
    throw new AgentMeshError(
      ErrorCode.NotFound,
      'the workspace root is not a git repository (git.inspect never looks above the workspace)',
      { retryable: false },
    );
  }
  const out: GitInspectResult = {
    subcommand: args.subcommand,
    exit_code: result.exit_code,
    stdout: result.stdout,
    stderr: result.stderr,
    handle: result.handle,
  };
  if (result.notice !== undefined) out.notice = result.notice;
  return out;
}
