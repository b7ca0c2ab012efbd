import { z } from 'zod';
import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';
import { checkArgumentPaths } from './argv-policy.js';
import { BoundaryRule, denied, quote } from './errors.js';
import { commandResult, awaitCommand, startCommand } from './shell-handlers.js';
import { DEFAULT_PROTECTED } from './options.js';
import { assertAccess } from './path-rules.js';
import { throwIfAborted, type WorkspaceCallContext, type WorkspaceRuntime } from './runtime.js';

/** The only git subcommands `git.inspect` runs: they read the repository and change nothing. */
export const GIT_READ_SUBCOMMANDS = ['status', 'log', 'diff', 'show', 'blame'] as const;
export type GitReadSubcommand = (typeof GIT_READ_SUBCOMMANDS)[number];

/** Long options each subcommand accepts (`--name` or `--name=value`). Anything else is refused. */
const LONG_OPTIONS: Readonly<Record<GitReadSubcommand, readonly string[]>> = {
  status: [
    'short',
    'branch',
    'porcelain',
    'long',
    'untracked-files',
    'ignored',
    'ignore-submodules',
    'ahead-behind',
    'renames',
    'no-renames',
    'column',
    'no-column',
    'show-stash',
  ],
  log: [],
  diff: ['cached', 'staged', 'merge-base'],
  show: [],
  blame: [
    'porcelain',
    'line-porcelain',
    'incremental',
    'show-stats',
    'show-name',
    'show-number',
    'show-email',
    'root',
    'reverse',
    'first-parent',
    'date',
    'abbrev',
    'score-debug',
    'minimal',
  ],
};
const LOG_LIKE = [
  'oneline',
  'format',
  'pretty',
  'abbrev-commit',
  'no-abbrev-commit',
  'max-count',
  'skip',
  'since',
  'after',
  'until',
  'before',
  'author',
  'committer',
  'grep',
  'all-match',
  'invert-grep',
  'regexp-ignore-case',
  'all',
  'branches',
  'tags',
  'remotes',
  'graph',
  'decorate',
  'no-decorate',
  'reverse',
  'first-parent',
  'no-merges',
  'merges',
  'follow',
  'date',
  'relative-date',
  'name-only',
  'name-status',
  'stat',
  'shortstat',
  'numstat',
  'summary',
  'patch',
  'no-patch',
  'unified',
  'raw',
  'topo-order',
  'date-order',
  'author-date-order',
  'left-right',
  'cherry-pick',
  'full-history',
  'simplify-merges',
  'ancestry-path',
  'boundary',
  'diff-filter',
  'find-renames',
  'find-copies',
  'word-diff',
  'ignore-all-space',
  'ignore-space-change',
  'ignore-blank-lines',
  'minimal',
  'patience',
  'histogram',
  'check',
  'full-index',
  'binary',
  'abbrev',
  'dirstat',
  'compact-summary',
  'color-words',
  'no-color',
  'show-signature',
  'notes',
  'no-notes',
  'encoding',
  'expand-tabs',
  'no-expand-tabs',
  'root',
  'pickaxe-all',
  'pickaxe-regex',
  'function-context',
  'inter-hunk-context',
  'relative',
  'no-relative',
  'ignore-submodules',
  'src-prefix',
  'dst-prefix',
  'no-prefix',
  'quiet',
  'exit-code',
];
/** One-letter options: those that take a glued value (`-n5`, `-U3`, `-L1,5`) and boolean ones that may cluster (`-pw`). */
const SHORT_WITH_VALUE = new Set(['n', 'U', 'S', 'G', 'L', 'M', 'C', 'B', 'l']);
const SHORT_FLAGS = new Set(['p', 's', 'b', 'u', 'w', 'z', 't', 'e', 'c', 'f', 'h', 'q', 'R', 'W', 'a', 'r']);
/** Options that read or write files, run programs or change what git looks at: never allowed. */
const FORBIDDEN = [
  'output',
  'ext-diff',
  'textconv',
  'orderfile',
  'no-index',
  'git-dir',
  'work-tree',
  'exec',
  'contents',
  'ignore-revs-file',
  'open-files-in-pager',
  'config',
  'upload-pack',
  'namespace',
  'output-directory',
  'paginate',
];

/** Exclude pathspecs so history and diffs never show protected folders or files with sensitive names. */
function hiddenPathspecs(runtime: WorkspaceRuntime): string[] {
  const folders = runtime.config.protectedAll.map((f) => f.join('/'));
  const names = [...DEFAULT_PROTECTED, ...folders.filter((f) => !f.includes('/'))];
  const specs = new Set<string>();
  for (const folder of folders) specs.add(`:(exclude,icase)${folder}`);
  for (const name of names) specs.add(`:(exclude,glob,icase)**/${name}/**`);
  for (const glob of runtime.config.denylist) {
    specs.add(`:(exclude,glob,icase)**/${glob.pattern}`);
    specs.add(`:(exclude,glob,icase)**/${glob.pattern}/**`);
  }
  return [...specs];
}

const REVISION = /^[A-Za-z0-9_./~^@{}:+=,-]+$/;

function allowedLong(subcommand: GitReadSubcommand): Set<string> {
  const own = LONG_OPTIONS[subcommand];
  return new Set(subcommand === 'status' ? own : [...own, ...LOG_LIKE]);
}

/** Checks the options and revisions of a git call; returns the arguments that are not options. */
function checkGitArgs(subcommand: GitReadSubcommand, args: readonly string[]): string[] {
  const long = allowedLong(subcommand);
  const positional: string[] = [];
  for (const arg of args) {
    if (arg.includes('\u0000') || arg.includes('\n')) {
      throw denied(BoundaryRule.GitOption, `git argument ${quote(arg)} holds a NUL or newline`, {
        argument: arg,
      });
    }
    if (arg === '--') {
      throw denied(BoundaryRule.GitOption, 'do not pass "--"; give file paths in "paths"', { argument: arg });
    }
    if (arg.startsWith('--')) {
      const name = arg.slice(2).split('=')[0] as string;
      const bare = name.startsWith('no-') && long.has(name.slice(3)) ? name.slice(3) : name;
      if (
        FORBIDDEN.some((f) => name === f || name.startsWith(`${f}-`)) ||
        !(long.has(name) || long.has(bare))
      ) {
        throw denied(
          BoundaryRule.GitOption,
          `git ${subcommand} option ${quote(arg)} is not allowed in git.inspect (options that write files, run programs or leave the repository are refused)`,
          { argument: arg },
        );
      }
      continue;
    }
    if (arg.startsWith('-')) {
      const body = arg.slice(1);
      const first = body[0] ?? '';
      const ok =
        /^\d+$/.test(body) ||
        (SHORT_WITH_VALUE.has(first) && (subcommand !== 'status' || first === 'u')) ||
        (body.length > 0 && [...body].every((c) => SHORT_FLAGS.has(c)));
      if (!ok) {
        throw denied(
          BoundaryRule.GitOption,
          `git ${subcommand} option ${quote(arg)} is not allowed in git.inspect`,
          { argument: arg },
        );
      }
      continue;
    }
    if (!REVISION.test(arg)) {
      throw denied(
        BoundaryRule.GitOption,
        `git argument ${quote(arg)} is not a revision; give file paths in "paths"`,
        { argument: arg },
      );
    }
    positional.push(arg);
  }
  return positional;
}

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

/** `-c` settings that keep git.inspect from running hooks, pagers, external diff drivers or fetches. */
const INSPECT_HARDENING = [
  '--no-pager',
  '-c',
  'core.fsmonitor=false',
  '-c',
  'core.hooksPath=/dev/null',
  '-c',
  'core.pager=cat',
  '-c',
  'color.ui=false',
  '-c',
  'core.quotePath=false',
  '-c',
  'diff.external=',
  '-c',
  'protocol.allow=never',
] as const;

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
  for (const revision of positional) {
    const colon = revision.lastIndexOf(':');
    if (colon === -1) continue;
    const objectPath = revision
      .slice(colon + 1)
      .split('/')
      .filter((s) => s !== '' && s !== '.');
    assertAccess(runtime.config, objectPath, 'read', revision);
  }
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
  const pathspec =
    subcommand === 'blame' ? paths : [...(paths.length > 0 ? paths : ['.']), ...hiddenPathspecs(runtime)];
  return [
    ...INSPECT_HARDENING,
    subcommand,
    ...(['diff', 'log', 'show'].includes(subcommand) ? ['--no-ext-diff', '--no-textconv'] : []),
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
    { GIT_NO_LAZY_FETCH: '1' },
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
