import { realpathSync, statSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { AgentMeshError, ErrorCode, type Identity } from '@agentmesh/protocol';
import { compileGlob, type GlobMatcher } from './glob.js';

/** What a mutating tool asks the embedding program before it acts. */
export interface ConfirmationRequest {
  tool: string;
  /** One line a person can judge, e.g. `write 120 bytes to src/a.ts (overwrite)`. */
  summary: string;
  arguments: unknown;
  run_id?: string | undefined;
  call_id?: string | undefined;
  identity?: Identity | undefined;
}

/**
 * Configuration of the `workspace` pack. Everything here can tighten the boundary, nothing loosens it: the
 * framework's sensitive-name denylist and protected folders (`.agentmesh/`, `.git/` for writes) always apply.
 */
export interface WorkspaceOptions {
  /** The workspace folder. Tools see it and its subfolders, after symlink resolution, and nothing else. */
  root: string;
  /** More folders (workspace-relative) that tools can neither read nor write. */
  protected?: string[];
  /** More folders (workspace-relative) that tools can read but never write. */
  protected_writes?: string[];
  /** More sensitive file-name globs (matched case-insensitively against every path segment). */
  denylist?: string[];
  /** argv prefixes `shell.run_command` may run, e.g. `[["git","status"],["ls"]]`. Default: a read-mostly set. */
  allow_argv_prefixes?: string[][];
  /** Allow `shell.run_command` with a `command` string run by `/bin/sh -c`. Default false. */
  allow_shell?: boolean;
  /** Default and maximum time a command may run before it is killed. Default 30000 ms, at most 600000. */
  shell_timeout_ms?: number;
  /** Extra environment variable names passed to commands (secret-looking names are still removed). */
  env_allow?: string[];
  /** The most bytes `fs.read_file` returns in one call. Default 65536. */
  max_read_bytes?: number;
  /** The largest content `fs.write_file` accepts. Default 1 MiB. */
  max_write_bytes?: number;
  /** The most bytes of each output stream a command call returns inline. Default 16384. */
  max_output_bytes?: number;
  /** The most bytes of each stream kept per command handle for paging. Default 4 MiB. */
  max_command_buffer_bytes?: number;
  /** Commands running at once in this pack. Default 8. */
  max_running_commands?: number;
  /** Finished command handles kept for `shell.read_command_output`. Default 64. */
  max_kept_handles?: number;
  /** The largest file `fs.search_files` scans. Default 1 MiB. */
  max_search_file_bytes?: number;
  /** The most files one `fs.search_files` or `fs.list_files` call visits. Default 20000. */
  max_visited_entries?: number;
  /** Asked before `fs.write_file` and `shell.run_command` act; a false answer refuses the call. */
  confirm?: (request: ConfirmationRequest) => Promise<boolean>;
}

/** The framework's sensitive names: never readable or writable, whatever the configuration says. */
export const DEFAULT_DENYLIST: readonly string[] = [
  '.env*',
  '*.pem',
  '*.key',
  '*.p12',
  '*.pfx',
  '*.ppk',
  '*.jks',
  '*.keystore',
  '*.kdbx',
  '*.gpg',
  'id_rsa*',
  'id_dsa*',
  'id_ecdsa*',
  'id_ed25519*',
  'authorized_keys*',
  '.ssh',
  '.gnupg',
  '.aws',
  '.kube',
  '.docker',
  '.netrc',
  '_netrc',
  '.npmrc',
  '.pypirc',
  '.pgpass',
  '.git-credentials',
  '.htpasswd',
  'credentials',
  'credentials.json',
  'secrets.json',
  'secrets.yaml',
  'secrets.yml',
];

/** Folders tools can neither read nor write. */
export const DEFAULT_PROTECTED: readonly string[] = ['.agentmesh'];
/** Folders tools can read but never write. */
export const DEFAULT_PROTECTED_WRITES: readonly string[] = ['.git'];

/**
 * Used when the configuration names no argv prefixes: programs that read, list and report. Each has an option
 * allow-list (program-options.ts; git as in git.inspect) that holds however it is allowed.
 */
export const DEFAULT_ALLOW_ARGV_PREFIXES: readonly (readonly string[])[] = [
  ['ls'],
  ['cat'],
  ['head'],
  ['tail'],
  ['wc'],
  ['grep'],
  ['rg'],
  ['echo'],
  ['pwd'],
  ['true'],
  ['stat'],
  ['file'],
  ['git', 'status'],
  ['git', 'diff'],
  ['git', 'log'],
  ['git', 'show'],
  ['node', '--version'],
  ['npm', '--version'],
];

/** The pack's configuration after validation, with the framework's rules merged in. */
export interface ResolvedWorkspaceConfig {
  /** Real path of the workspace root (symlinks resolved). */
  rootReal: string;
  /** Protected folders as lowercase segment lists, for reads and writes. */
  protectedAll: readonly (readonly string[])[];
  /** Write-only protected folders as lowercase segment lists. */
  protectedWrites: readonly (readonly string[])[];
  denylist: readonly GlobMatcher[];
  allowArgvPrefixes: readonly (readonly string[])[];
  allowShell: boolean;
  shellTimeoutMs: number;
  envAllow: readonly string[];
  maxReadBytes: number;
  maxWriteBytes: number;
  maxOutputBytes: number;
  maxCommandBufferBytes: number;
  maxRunningCommands: number;
  maxKeptHandles: number;
  maxSearchFileBytes: number;
  maxVisitedEntries: number;
  confirm: ((request: ConfirmationRequest) => Promise<boolean>) | undefined;
}

export const MAX_SHELL_TIMEOUT_MS = 600_000;

function configError(key: string, message: string): AgentMeshError {
  return new AgentMeshError(ErrorCode.InvalidConfig, `workspace.${key}: ${message}`, { details: { key } });
}

function positiveInt(key: string, value: number | undefined, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw configError(key, `must be an integer from 1 to ${max}, got ${String(value)}`);
  }
  return value;
}

function folderSegments(key: string, folder: string): string[] {
  const segments = folder
    .replace(/\\/g, '/')
    .split('/')
    .filter((s) => s !== '' && s !== '.');
  if (segments.length === 0 || segments.includes('..') || isAbsolute(folder)) {
    throw configError(
      key,
      `${JSON.stringify(folder)} must be a folder relative to the workspace root, without ".."`,
    );
  }
  return segments.map((s) => s.toLowerCase());
}

/** Validates options and merges in the framework's rules. Throws `invalid_config` naming the bad key. */
function resolveRoot(root: unknown): string {
  if (typeof root !== 'string' || root.length === 0) {
    throw configError('root', 'must name the workspace folder');
  }
  let rootReal: string;
  try {
    rootReal = realpathSync(resolve(root));
    if (!statSync(rootReal).isDirectory()) throw configError('root', `${root} is not a folder`);
  } catch (error) {
    if (error instanceof AgentMeshError) throw error;
    throw configError('root', `${root} does not exist or cannot be opened (${(error as Error).message})`);
  }
  if (rootReal === '/') throw configError('root', 'the file-system root cannot be a workspace');
  return rootReal;
}

function compileDenylist(patterns: readonly string[]): GlobMatcher[] {
  return patterns.map((pattern) => {
    if (pattern.includes('/'))
      throw configError('denylist', `${JSON.stringify(pattern)} must be a file-name glob without "/"`);
    try {
      return compileGlob(pattern, { caseInsensitive: true });
    } catch (error) {
      throw configError('denylist', (error as Error).message);
    }
  });
}

function checkPolicyOptions(options: WorkspaceOptions, prefixes: readonly (readonly string[])[]): void {
  for (const prefix of prefixes) {
    if (
      !Array.isArray(prefix) ||
      prefix.length === 0 ||
      prefix.some((p) => typeof p !== 'string' || p.length === 0)
    ) {
      throw configError('allow_argv_prefixes', 'each entry must be a non-empty list of non-empty strings');
    }
  }
  for (const name of options.env_allow ?? []) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
      throw configError('env_allow', `${JSON.stringify(name)} is not a variable name`);
  }
  if (options.confirm !== undefined && typeof options.confirm !== 'function') {
    throw configError('confirm', 'must be a function returning Promise<boolean>');
  }
}

export function resolveWorkspaceConfig(options: WorkspaceOptions): ResolvedWorkspaceConfig {
  const rootReal = resolveRoot(options.root);
  const protectedAll = [...DEFAULT_PROTECTED, ...(options.protected ?? [])].map((f) =>
    folderSegments('protected', f),
  );
  const protectedWrites = [...DEFAULT_PROTECTED_WRITES, ...(options.protected_writes ?? [])].map((f) =>
    folderSegments('protected_writes', f),
  );
  const denylist = compileDenylist([...DEFAULT_DENYLIST, ...(options.denylist ?? [])]);
  const prefixes = options.allow_argv_prefixes ?? DEFAULT_ALLOW_ARGV_PREFIXES;
  checkPolicyOptions(options, prefixes);

  return {
    rootReal,
    protectedAll,
    protectedWrites,
    denylist,
    allowArgvPrefixes: prefixes.map((p) => [...p]),
    allowShell: options.allow_shell === true,
    shellTimeoutMs: positiveInt('shell_timeout_ms', options.shell_timeout_ms, 30_000, MAX_SHELL_TIMEOUT_MS),
    envAllow: [...(options.env_allow ?? [])],
    maxReadBytes: positiveInt('max_read_bytes', options.max_read_bytes, 65_536, 16 * 1024 * 1024),
    maxWriteBytes: positiveInt('max_write_bytes', options.max_write_bytes, 1024 * 1024, 64 * 1024 * 1024),
    maxOutputBytes: positiveInt('max_output_bytes', options.max_output_bytes, 16_384, 1024 * 1024),
    maxCommandBufferBytes: positiveInt(
      'max_command_buffer_bytes',
      options.max_command_buffer_bytes,
      4 * 1024 * 1024,
      64 * 1024 * 1024,
    ),
    maxRunningCommands: positiveInt('max_running_commands', options.max_running_commands, 8, 256),
    maxKeptHandles: positiveInt('max_kept_handles', options.max_kept_handles, 64, 4096),
    maxSearchFileBytes: positiveInt(
      'max_search_file_bytes',
      options.max_search_file_bytes,
      1024 * 1024,
      64 * 1024 * 1024,
    ),
    maxVisitedEntries: positiveInt('max_visited_entries', options.max_visited_entries, 20_000, 1_000_000),
    confirm: options.confirm,
  };
}
