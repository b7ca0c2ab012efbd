import { lstat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { BoundaryRule, denied, quote } from './errors.js';
import {
  checkEmbeddedPaths,
  checkGitOption,
  GIT_FORBIDDEN_OPTIONS,
  GIT_HARDENING_ARGS,
  GIT_HARDENING_ENV,
  GIT_READ_SUBCOMMANDS,
  gitSubcommandHardening,
  gitPathspec,
  REVISION,
  type GitReadSubcommand,
} from './git-options.js';
import { DEFAULT_PROTECTED, type ResolvedWorkspaceConfig } from './options.js';
import { checkFindArgs, checkProgramOptions, PROGRAM_OPTIONS } from './program-options.js';
import type { WorkspaceRuntime } from './runtime.js';

/** What `shell.run_command` actually runs for a checked argv: the arguments after the program, and extra variables. */
export interface PlannedCommand {
  args: string[];
  env: Readonly<Record<string, string>>;
}

/**
 * A denylist glob as a case-insensitive shell pattern for grep and ls (`.env*` becomes `.[eE][nN][vV]*`). Braces
 * and classes widen to `*` and `?`, and `\` to `?`: the pattern may hide more, never less.
 */
export function foldedGlob(pattern: string): string {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i] as string;
    const close = ch === '{' ? pattern.indexOf('}', i) : ch === '[' ? pattern.indexOf(']', i + 2) : -1;
    if (close !== -1) {
      out += ch === '{' ? '*' : '?';
      i = close;
    } else if (ch === '*') {
      if (!out.endsWith('*')) out += '*';
    } else if (ch === '\\' || ch === '[' || ch === ']' || ch === '?') {
      out += '?';
    } else if (ch.toLowerCase() !== ch.toUpperCase()) {
      out += `[${ch.toLowerCase()}${ch.toUpperCase()}]`;
    } else {
      out += ch;
    }
  }
  return out;
}

/** Names a recursive listing or search must skip: sensitive file names, and protected folders at any depth. */
function hiddenNames(config: ResolvedWorkspaceConfig): { files: string[]; folders: string[] } {
  const files = [...new Set(config.denylist.map((g) => foldedGlob(g.pattern)))];
  const protectedNames = [...DEFAULT_PROTECTED, ...config.protectedAll.map((f) => f[f.length - 1] as string)];
  const folders = [...new Set([...protectedNames.map(foldedGlob), ...files])];
  return { files, folders };
}

/** Options added so grep, rg and ls skip what the sensitive-name and protected-folder rules hide from the fs tools. */
function exclusionArgs(program: string, config: ResolvedWorkspaceConfig): string[] {
  const { files, folders } = hiddenNames(config);
  if (program === 'rg') {
    return ['--no-config', ...[...new Set([...files, ...folders])].map((g) => `--iglob=!${g}`)];
  }
  if (program === 'ls') return [...new Set([...files, ...folders])].map((g) => `--ignore=${g}`);
  if (['grep', 'egrep', 'fgrep'].includes(program)) {
    return [...files.map((g) => `--exclude=${g}`), ...folders.map((g) => `--exclude-dir=${g}`)];
  }
  return [];
}

function isReadSubcommand(subcommand: string): subcommand is GitReadSubcommand {
  return (GIT_READ_SUBCOMMANDS as readonly string[]).includes(subcommand);
}

function refuseGit(message: string, arg: string): never {
  throw denied(BoundaryRule.GitOption, message, { argument: arg });
}

/** For git subcommands only a configured prefix allows: refuses the options (and abbreviations) of the deny-list. */
function checkOtherGitArgs(subcommand: string, args: readonly string[]): void {
  for (const arg of args) {
    if (!arg.startsWith('--') || arg === '--') continue;
    const name = arg.slice(2).split('=')[0] as string;
    if (GIT_FORBIDDEN_OPTIONS.some((f) => f.startsWith(name) || name.startsWith(f))) {
      refuseGit(
        `git ${subcommand} option ${quote(arg)} writes files, runs programs or leaves the repository`,
        arg,
      );
    }
  }
}

function pathExists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  );
}

/**
 * Splits the arguments of a read-only git subcommand into checked options and revisions, and paths: those after
 * "--", and those before it that name something in the working folder.
 */
async function splitGitArgs(
  runtime: WorkspaceRuntime,
  subcommand: GitReadSubcommand,
  args: readonly string[],
  cwdSegments: readonly string[],
): Promise<{ kept: string[]; paths: string[] }> {
  const end = args.indexOf('--');
  const kept: string[] = [];
  const paths: string[] = [];
  for (const arg of end === -1 ? args : args.slice(0, end)) {
    if (arg.startsWith('-') && arg !== '-') {
      checkGitOption(subcommand, arg, 'shell.run_command');
      kept.push(arg);
    } else if (await pathExists(join(runtime.resolver.root, ...cwdSegments, arg))) {
      paths.push(arg);
    } else if (REVISION.test(arg)) {
      kept.push(arg);
    } else {
      refuseGit(
        `git argument ${quote(arg)} is neither a revision nor an existing path; put paths after "--"`,
        arg,
      );
    }
  }
  if (end !== -1) paths.push(...args.slice(end + 1));
  checkEmbeddedPaths(runtime.config, kept);
  return { kept, paths };
}

/**
 * git as `git.inspect` runs it: no global options from the caller, the same hardening (no hooks, fsmonitor, pager,
 * external diff or textconv, no network), and for the read-only subcommands the same option allow-list and the
 * exclude pathspecs that keep protected and sensitive paths out of status, diffs and history.
 */
async function planGit(
  runtime: WorkspaceRuntime,
  args: readonly string[],
  cwdSegments: readonly string[],
): Promise<PlannedCommand> {
  const subcommand = args[0];
  if (subcommand === undefined || subcommand.startsWith('-')) {
    refuseGit(
      `git options before the subcommand (${quote(subcommand ?? '')}; e.g. -c, -C, --git-dir, --work-tree, --exec-path, --config-env) are refused: start with the subcommand, e.g. ["git", "status"]`,
      subcommand ?? '',
    );
  }
  if (!isReadSubcommand(subcommand)) {
    checkOtherGitArgs(subcommand, args.slice(1));
    return { args: [...GIT_HARDENING_ARGS, ...args], env: GIT_HARDENING_ENV };
  }
  const { kept, paths } = await splitGitArgs(runtime, subcommand, args.slice(1), cwdSegments);
  const pathspec = gitPathspec(runtime.config, subcommand, kept, paths, ':(top)');
  return {
    args: [
      ...GIT_HARDENING_ARGS,
      subcommand,
      ...gitSubcommandHardening(subcommand),
      ...kept,
      ...(pathspec.length > 0 ? ['--', ...pathspec] : []),
    ],
    env: GIT_HARDENING_ENV,
  };
}

/**
 * Checks the options of a program the workspace knows (the default allow-list, and git and find however they were
 * allowed) and returns what to run: programs it does not know run as given, since only configuration allows them.
 */
export async function planCommand(
  runtime: WorkspaceRuntime,
  argv: readonly string[],
  cwdSegments: readonly string[],
): Promise<PlannedCommand> {
  const program = basename(argv[0] as string);
  const args = argv.slice(1);
  if (program === 'git') return planGit(runtime, args, cwdSegments);
  if ((program === 'node' || program === 'npm') && args[0] === '--version' && args.length > 1) {
    throw denied(BoundaryRule.CommandOption, `${program} --version takes no further arguments`, {
      program,
      argument: args[1],
    });
  }
  if (program === 'find') checkFindArgs(args);
  if (!Object.hasOwn(PROGRAM_OPTIONS, program)) return { args, env: {} };
  const end = checkProgramOptions(
    program,
    PROGRAM_OPTIONS[program] as (typeof PROGRAM_OPTIONS)[string],
    args,
  );
  const extra = exclusionArgs(program, runtime.config);
  return { args: [...args.slice(0, end), ...extra, ...args.slice(end)], env: {} };
}
