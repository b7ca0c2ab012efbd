import { lstat } from 'node:fs/promises';
import { basename, join, normalize, posix } from 'node:path';
import { BoundaryRule, denied, invalid, quote } from './errors.js';
import type { ResolvedWorkspaceConfig } from './options.js';
import { assertAccess } from './path-rules.js';
import type { WorkspaceResolver } from './resolver.js';

/** Programs that run other programs or a shell: refused unless `allow_shell` is set, whatever the prefixes say. */
export const COMMAND_RUNNERS: ReadonlySet<string> = new Set([
  'sh',
  'bash',
  'zsh',
  'dash',
  'ksh',
  'mksh',
  'fish',
  'csh',
  'tcsh',
  'busybox',
  'env',
  'sudo',
  'su',
  'doas',
  'xargs',
  'nohup',
  'setsid',
  'timeout',
  'nice',
  'ionice',
  'chroot',
  'unshare',
  'nsenter',
  'script',
  'expect',
  'watch',
  'strace',
  'ltrace',
  'gdb',
]);

/** Options that make a program follow symbolic links while it walks folders, which would lead it outside. */
const LINK_FOLLOWING_OPTIONS: Readonly<Record<string, { short: string; long: readonly string[] }>> = {
  grep: { short: 'R', long: ['--dereference-recursive'] },
  egrep: { short: 'R', long: ['--dereference-recursive'] },
  fgrep: { short: 'R', long: ['--dereference-recursive'] },
  rg: { short: 'L', long: ['--follow'] },
  ls: { short: 'L', long: ['--dereference'] },
  stat: { short: 'L', long: ['--dereference'] },
  du: { short: 'L', long: ['--dereference'] },
  find: { short: 'L', long: ['-follow'] },
  diff: { short: 'r', long: ['--recursive'] },
  tree: { short: 'l', long: [] },
  cp: { short: 'LR', long: ['--dereference'] },
};

const OPERATOR_TOKENS: ReadonlySet<string> = new Set([
  '|',
  '||',
  '&',
  '&&',
  ';',
  ';;',
  '>',
  '>>',
  '<',
  '<<',
  '<<<',
  '>|',
  '&>',
  '&>>',
  '2>',
  '2>>',
  '2>&1',
  '1>&2',
  '>&2',
  '(',
  ')',
  '{',
  '}',
  '!',
]);
const PROGRAM_METACHARACTERS = /[\s|&;<>()$`\\"'*?[\]{}~!#]/;
const SUBSTITUTION = /`|\$\(|\$\{|\$[A-Za-z_]/;

function shownArgv(argv: readonly string[]): string {
  return JSON.stringify(argv).slice(0, 300);
}

/** Refuses argv that relies on a shell: metacharacters in the program, operator tokens, substitutions or newlines. */
function assertNoShellSyntax(argv: readonly string[], program: string): void {
  if (PROGRAM_METACHARACTERS.test(program)) {
    throw denied(
      BoundaryRule.ShellMetacharacters,
      `argv[0] ${quote(program)} looks like a shell command line; commands run without a shell, so give each word as its own argv element (["ls", "-la"]) and leave out pipes, redirects and quotes`,
      { argv: argv.slice(0, 20) },
    );
  }
  const operator = argv.find((a) => OPERATOR_TOKENS.has(a));
  if (operator !== undefined) {
    throw denied(
      BoundaryRule.ShellMetacharacters,
      `argv contains the shell operator ${quote(operator)}; commands run without a shell, so pipes, redirects and command lists do not work: run one program per call`,
      { argv: argv.slice(0, 20), operator },
    );
  }
  const substituted = argv.find((a) => SUBSTITUTION.test(a) || a.includes('\n'));
  if (substituted !== undefined) {
    throw denied(
      BoundaryRule.ShellMetacharacters,
      `argument ${quote(substituted)} uses shell substitution or a newline ($VAR, $(...), backticks); no shell runs, so nothing would expand it: pass literal values`,
      { argv: argv.slice(0, 20) },
    );
  }
}

/** Refuses an option (before any `--`) that makes the program follow symbolic links while it walks folders. */
function assertNoLinkFollowingOption(argv: readonly string[], program: string): void {
  const following = LINK_FOLLOWING_OPTIONS[basename(program)];
  if (following === undefined) return;
  const end = argv.indexOf('--');
  for (const arg of argv.slice(1, end === -1 ? undefined : end)) {
    const long = arg.split('=')[0] as string;
    const isShortCluster = /^-[A-Za-z0-9]+$/.test(arg);
    if (
      following.long.includes(long) ||
      (isShortCluster && [...following.short].some((c) => arg.includes(c)))
    ) {
      throw denied(
        BoundaryRule.LinkFollowingOption,
        `option ${quote(arg)} makes ${program} follow symbolic links, which could lead outside the workspace; leave it out`,
        { argv: argv.slice(0, 20), option: arg },
      );
    }
  }
}

/** Refuses argv that does not start with one of the workspace's allowed command prefixes. */
function assertAllowedPrefix(config: ResolvedWorkspaceConfig, argv: readonly string[]): void {
  const allowed = config.allowArgvPrefixes.some(
    (prefix) => argv.length >= prefix.length && prefix.every((part, i) => argv[i] === part),
  );
  if (!allowed) {
    throw denied(
      BoundaryRule.ArgvNotAllowed,
      `argv ${shownArgv(argv)} is not allowed; allowed command prefixes are: ${config.allowArgvPrefixes.map((p) => p.join(' ')).join(', ')}`,
      { argv: argv.slice(0, 20) },
    );
  }
}

/**
 * Checks argv against the allow-list of prefixes and the rules for running without a shell: no NUL, no shell
 * operators or substitutions (nothing would interpret them), no command runners unless a shell is allowed.
 */
export function checkArgv(config: ResolvedWorkspaceConfig, argv: readonly string[]): void {
  if (argv.length === 0 || argv[0] === undefined || argv[0] === '') {
    throw invalid('argv must start with a program name, e.g. ["ls", "-la"]');
  }
  if (argv.some((a) => a.includes('\u0000'))) {
    throw invalid(`argv ${shownArgv(argv)} contains a NUL byte`, { rule: BoundaryRule.NulByte });
  }
  const program = argv[0];
  assertNoShellSyntax(argv, program);
  if (!config.allowShell && COMMAND_RUNNERS.has(basename(program))) {
    throw denied(
      BoundaryRule.ShellDisabled,
      `${quote(program)} runs a shell or another program, which this workspace does not allow; run the program you need directly`,
      { program },
    );
  }
  assertNoLinkFollowingOption(argv, program);
  assertAllowedPrefix(config, argv);
}

/** Values an argument may carry a path in: the whole, after `--opt=`, or after a one-letter flag (`-I/x`). */
function pathCandidates(argument: string): string[] {
  const candidates = [argument];
  const eq = argument.indexOf('=');
  if (argument.startsWith('-') && eq > 0) candidates.push(argument.slice(eq + 1));
  if (/^-[A-Za-z]./.test(argument) && !argument.startsWith('--')) candidates.push(argument.slice(2));
  return candidates;
}

const ALLOWED_ABSOLUTE = new Set(['/dev/null']);

/**
 * Refuses arguments that name paths outside the workspace (absolute, `~`, `..` that climbs above the root), or
 * existing paths that resolve outside, into a protected folder, or onto a sensitive name. A heuristic on top of the
 * allow-list: an allowed program may still reach further through its own logic.
 */
export async function checkArgumentPaths(
  resolver: WorkspaceResolver,
  args: readonly string[],
  cwdSegments: readonly string[],
): Promise<void> {
  for (const argument of args) {
    for (const candidate of pathCandidates(argument)) {
      if (candidate === '' || candidate === '-' || candidate === '--') continue;
      if (ALLOWED_ABSOLUTE.has(candidate)) continue;
      if (candidate.startsWith('/') || candidate === '~' || candidate.startsWith('~/')) {
        throw denied(
          BoundaryRule.ArgumentPath,
          `argument ${quote(argument)} names a path outside the workspace; commands may only use paths relative to the workspace`,
          { argument },
        );
      }
      const relativeToRoot = normalize(posix.join(...cwdSegments, candidate));
      if (relativeToRoot === '..' || relativeToRoot.startsWith('../')) {
        throw denied(
          BoundaryRule.ArgumentPath,
          `argument ${quote(argument)} climbs above the workspace root with ".."`,
          { argument },
        );
      }
      const segments = relativeToRoot.split('/').filter((s) => s !== '' && s !== '.');
      if (segments.length === 0) continue;
      assertAccess(resolver.config, segments, 'read', argument);
      const exists = await lstat(join(resolver.root, ...segments)).then(
        () => true,
        () => false,
      );
      if (!exists) continue;
      try {
        await resolver.resolve(segments.join('/'), {
          access: 'read',
          argument: 'argument',
          mustExist: false,
        });
      } catch (error) {
        if ((error as { code?: string }).code === 'permission_denied') throw error;
      }
    }
  }
}
