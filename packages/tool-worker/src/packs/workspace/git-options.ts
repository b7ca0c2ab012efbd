import { BoundaryRule, denied, quote } from './errors.js';
import { DEFAULT_PROTECTED, type ResolvedWorkspaceConfig } from './options.js';
import { assertAccess } from './path-rules.js';

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
/** Long options that read or write files, run programs or change what git looks at: never allowed. */
export const GIT_FORBIDDEN_OPTIONS = [
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

/**
 * Exclude pathspecs so history, diffs and status never show protected folders or files with sensitive names. They
 * carry `top` magic, so they hold from any working folder; a protected folder's last name is excluded at any depth,
 * so they also hold in a repository nested in the workspace.
 */
export function hiddenPathspecs(config: ResolvedWorkspaceConfig): string[] {
  const folders = config.protectedAll.map((f) => f.join('/'));
  const names = [...DEFAULT_PROTECTED, ...config.protectedAll.map((f) => f[f.length - 1] as string)];
  const specs = new Set<string>();
  for (const folder of folders) specs.add(`:(exclude,top,icase)${folder}`);
  for (const name of names) specs.add(`:(exclude,top,glob,icase)**/${name}/**`);
  for (const glob of config.denylist) {
    specs.add(`:(exclude,top,glob,icase)**/${glob.pattern}`);
    specs.add(`:(exclude,top,glob,icase)**/${glob.pattern}/**`);
  }
  return [...specs];
}

/**
 * The pathspec after "--" of a read-only git call: the paths given (or `whole` when none) and the exclusions. blame
 * names one file and `-L` a line range of one, both checked as paths already: they take no exclusions (git refuses
 * `-L` together with a pathspec).
 */
export function gitPathspec(
  config: ResolvedWorkspaceConfig,
  subcommand: GitReadSubcommand,
  args: readonly string[],
  paths: readonly string[],
  whole: string,
): string[] {
  if (subcommand === 'blame' || args.some((a) => a.startsWith('-L'))) return [...paths];
  return [...(paths.length > 0 ? paths : [whole]), ...hiddenPathspecs(config)];
}

/** What a revision argument may look like (`HEAD~2`, `main..topic`, `HEAD:src/a.ts`, `@{1}`). */
export const REVISION = /^[A-Za-z0-9_./~^@{}:+=,-]+$/;

function allowedLong(subcommand: GitReadSubcommand): Set<string> {
  const own = LONG_OPTIONS[subcommand];
  return new Set(subcommand === 'status' ? own : [...own, ...LOG_LIKE]);
}

function refuseOption(subcommand: string, arg: string, tool: string): never {
  throw denied(
    BoundaryRule.GitOption,
    `git ${subcommand} option ${quote(arg)} is not allowed in ${tool} (options that write files, run programs or leave the repository are refused; long options must be spelled out in full)`,
    { argument: arg },
  );
}

/** Throws unless `arg` (which starts with "-") is an option `subcommand` may take: exact names only, no abbreviations. */
export function checkGitOption(subcommand: GitReadSubcommand, arg: string, tool: string): void {
  if (arg.startsWith('--')) {
    const long = allowedLong(subcommand);
    const name = arg.slice(2).split('=')[0] as string;
    const bare = name.startsWith('no-') && long.has(name.slice(3)) ? name.slice(3) : name;
    if (
      GIT_FORBIDDEN_OPTIONS.some((f) => name === f || name.startsWith(`${f}-`)) ||
      !(long.has(name) || long.has(bare))
    ) {
      refuseOption(subcommand, arg, tool);
    }
    return;
  }
  const body = arg.slice(1);
  const first = body[0] ?? '';
  const ok =
    /^\d+$/.test(body) ||
    (SHORT_WITH_VALUE.has(first) && (subcommand !== 'status' || first === 'u')) ||
    (body.length > 0 && [...body].every((c) => SHORT_FLAGS.has(c)));
  if (!ok) refuseOption(subcommand, arg, tool);
}

/** Checks the options and revisions of a git.inspect call; returns the arguments that are not options. */
export function checkGitArgs(subcommand: GitReadSubcommand, args: readonly string[]): string[] {
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
    if (arg.startsWith('-')) {
      checkGitOption(subcommand, arg, 'git.inspect');
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

/**
 * Refuses file paths hidden inside git arguments: `HEAD:.env` (a blob by path) and `-L1,5:.env` (a line range of a
 * file) must pass the same protected-folder and sensitive-name rules as any path.
 */
export function checkEmbeddedPaths(config: ResolvedWorkspaceConfig, args: readonly string[]): void {
  for (const arg of args) {
    const isRange = arg.startsWith('-L');
    if (arg.startsWith('-') && !isRange) continue;
    const colon = arg.lastIndexOf(':');
    if (colon === -1) continue;
    const objectPath = arg
      .slice(colon + 1)
      .split('/')
      .filter((s) => s !== '' && s !== '.');
    assertAccess(config, objectPath, 'read', arg);
  }
}

/**
 * Global options that keep every git run by the workspace tools from running hooks, fsmonitor programs, pagers or
 * external diff drivers, and from fetching: command-line settings win over the repository's own config.
 */
export const GIT_HARDENING_ARGS: readonly string[] = [
  '--no-pager',
  '--no-replace-objects',
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
];

/** Environment of every git run (on top of the scrubbed environment, which already drops system and user config). */
export const GIT_HARDENING_ENV: Readonly<Record<string, string>> = {
  GIT_NO_LAZY_FETCH: '1',
  GIT_NO_REPLACE_OBJECTS: '1',
  GIT_LITERAL_PATHSPECS: '0',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_CONFIG_COUNT: '0',
  GIT_PROTOCOL_FROM_USER: '0',
};

/** Per-subcommand options added after the subcommand: no external diff programs, no textconv filters. */
export function gitSubcommandHardening(subcommand: string): string[] {
  return ['diff', 'log', 'show'].includes(subcommand) ? ['--no-ext-diff', '--no-textconv'] : [];
}
