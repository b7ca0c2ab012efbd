import { constants, existsSync, type Stats } from 'node:fs';
import { lstat, mkdir, open, readlink, realpath, stat, type FileHandle } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';
import { BoundaryRule, denied, invalid, notFound, quote } from './errors.js';
import type { ResolvedWorkspaceConfig } from './options.js';
import { assertAccess, parseWorkspacePath, type PathAccess } from './path-rules.js';

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_APPEND, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = constants;

/** What a path is at check time. */
export type PathKind = 'file' | 'directory' | 'other' | 'missing';

/** A path that passed the boundary checks. */
export interface ResolvedPath {
  /** The path as the model gave it. */
  input: string;
  /** The real path, workspace-relative (`.` for the root). */
  relative: string;
  /** Segments of {@link relative}. */
  segments: readonly string[];
  /** The real absolute path. */
  real: string;
  kind: PathKind;
  access: PathAccess;
}

export interface ResolveOptions {
  access: PathAccess;
  /** Name of the argument, for messages. Default `path`. */
  argument?: string;
  /** Throw `not_found` when nothing exists at the path. Default true. */
  mustExist?: boolean;
}

/** Test seams: code that runs between the check and the use of a path. Never set in production. */
export interface ResolverHooks {
  beforeOpen?: (resolved: ResolvedPath) => Promise<void> | void;
}

export type WriteMode = 'overwrite' | 'append' | 'create';

/** An opened regular file with the stat taken from its descriptor. */
export interface OpenedFile {
  handle: FileHandle;
  stat: Stats;
  resolved: ResolvedPath;
  created: boolean;
}

function errnoCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * The one gate every workspace path goes through. `resolve` checks a path lexically, resolves symlinks and checks
 * the real path against the root, protected folders and the denylist. The `open*` methods then open the real path
 * by walking from the root one segment at a time without following any symlink (each step opens
 * `/proc/self/fd/<dir>/<name>` with O_NOFOLLOW, the Linux equivalent of openat), so a folder or file swapped for a
 * link between the check and the use makes the open fail instead of escaping.
 */
export class WorkspaceResolver {
  readonly config: ResolvedWorkspaceConfig;
  private readonly hooks: ResolverHooks;
  private readonly hasProcFd: boolean;

  constructor(config: ResolvedWorkspaceConfig, hooks: ResolverHooks = {}) {
    this.config = config;
    this.hooks = hooks;
    this.hasProcFd = existsSync('/proc/self/fd');
  }

  get root(): string {
    return this.config.rootReal;
  }

  /** Whether `absolute` is the workspace root or inside it. */
  contains(absolute: string): boolean {
    return absolute === this.root || absolute.startsWith(this.root + sep);
  }

  /** Checks `input` and resolves it to a real path inside the workspace. */
  async resolve(input: unknown, options: ResolveOptions): Promise<ResolvedPath> {
    const argument = options.argument ?? 'path';
    const segments = parseWorkspacePath(input, argument);
    const shown = input as string;
    assertAccess(this.config, segments, options.access, shown);

    const lexical = join(this.root, ...segments);
    let real: string;
    let kind: PathKind;
    try {
      real = await realpath(lexical);
      kind = kindOf(await stat(real));
    } catch (error) {
      const code = errnoCode(error);
      if (code === 'ELOOP') {
        throw denied(
          BoundaryRule.SymbolicLink,
          `${argument} ${quote(shown)} goes through a symbolic-link loop`,
          { path: shown },
        );
      }
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw fsError(error, shown);
      real = await this.realPathOfMissing(segments, shown, argument);
      kind = 'missing';
    }
    if (!this.contains(real)) {
      throw denied(
        BoundaryRule.OutsideWorkspace,
        `${argument} ${quote(shown)} leads outside the workspace through a symbolic link; tools only see the workspace`,
        { path: shown },
      );
    }
    const rel = relative(this.root, real);
    const realSegments = rel === '' ? [] : rel.split(sep);
    assertAccess(this.config, realSegments, options.access, shown);
    if (kind === 'missing' && options.mustExist !== false) {
      throw notFound(`${argument} ${quote(shown)} does not exist in the workspace`, { path: shown });
    }
    return {
      input: shown,
      relative: rel === '' ? '.' : rel,
      segments: realSegments,
      real,
      kind,
      access: options.access,
    };
  }

  /** The real path a missing path would have: its deepest existing ancestor resolved, the rest appended. */
  private async realPathOfMissing(
    segments: readonly string[],
    shown: string,
    argument: string,
  ): Promise<string> {
    for (let keep = segments.length - 1; keep >= 0; keep--) {
      const ancestor = join(this.root, ...segments.slice(0, keep));
      let ancestorReal: string;
      try {
        ancestorReal = await realpath(ancestor);
      } catch (error) {
        const code = errnoCode(error);
        if (code === 'ENOENT' || code === 'ENOTDIR') continue;
        if (code === 'ELOOP') {
          throw denied(
            BoundaryRule.SymbolicLink,
            `${argument} ${quote(shown)} goes through a symbolic-link loop`,
            { path: shown },
          );
        }
        throw fsError(error, shown);
      }
      if (!this.contains(ancestorReal)) {
        throw denied(
          BoundaryRule.OutsideWorkspace,
          `${argument} ${quote(shown)} has a parent folder that is a symbolic link leading outside the workspace`,
          { path: shown },
        );
      }
      return join(ancestorReal, ...segments.slice(keep));
    }
    return join(this.root, ...segments);
  }

  /** Opens an existing regular file for reading. Refuses links, hard-linked files and non-regular files. */
  async openFileForRead(input: unknown, argument = 'path'): Promise<OpenedFile> {
    const resolved = await this.resolve(input, { access: 'read', argument });
    if (resolved.kind === 'directory') {
      throw invalid(
        `${argument} ${quote(resolved.input)} is a folder; use fs.list_files to see what it holds`,
        {
          path: resolved.input,
        },
      );
    }
    await this.hooks.beforeOpen?.(resolved);
    const handle = await this.openBeneath(resolved, O_RDONLY | O_NONBLOCK);
    try {
      const fileStat = await checkOpenedFile(handle, resolved);
      return { handle, stat: fileStat, resolved, created: false };
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /**
   * Opens a regular file for writing, creating it (and, with `createDirs`, its folders) inside the workspace.
   * Nothing is truncated until the opened descriptor has been checked.
   */
  async openFileForWrite(
    input: unknown,
    options: { mode: WriteMode; createDirs?: boolean; argument?: string },
  ): Promise<OpenedFile> {
    const argument = options.argument ?? 'path';
    const resolved = await this.resolve(input, { access: 'write', argument, mustExist: false });
    if (resolved.segments.length === 0 || resolved.kind === 'directory') {
      throw invalid(`${argument} ${quote(resolved.input)} is a folder; give a file path`, {
        path: resolved.input,
      });
    }
    if (resolved.kind === 'missing' && options.createDirs !== true) {
      const parent = await this.resolve(
        resolved.segments.length > 1 ? resolved.segments.slice(0, -1).join('/') : '.',
        { access: 'write', argument, mustExist: false },
      );
      if (parent.kind === 'missing') {
        throw notFound(
          `the folder of ${argument} ${quote(resolved.input)} does not exist; pass create_dirs: true to create it`,
          { path: resolved.input },
        );
      }
    }
    if (options.mode === 'create' && resolved.kind !== 'missing') {
      throw new AgentMeshError(
        ErrorCode.Conflict,
        `${argument} ${quote(resolved.input)} already exists (mode "create")`,
        {
          details: { path: resolved.input },
        },
      );
    }
    await this.hooks.beforeOpen?.(resolved);
    let flags = O_WRONLY | O_CREAT | O_NONBLOCK;
    if (options.mode === 'create') flags |= O_EXCL;
    if (options.mode === 'append') flags |= O_APPEND;
    const handle = await this.openBeneath(resolved, flags, { createDirs: options.createDirs === true });
    try {
      const fileStat = await checkOpenedFile(handle, resolved);
      return { handle, stat: fileStat, resolved, created: resolved.kind === 'missing' };
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /** Opens an existing folder (for listing, searching, or as a command's cwd). */
  async openDirectory(
    input: unknown,
    argument = 'path',
  ): Promise<{ handle: FileHandle; resolved: ResolvedPath }> {
    const resolved = await this.resolve(input, { access: 'read', argument });
    if (resolved.kind !== 'directory') {
      throw invalid(`${argument} ${quote(resolved.input)} is not a folder`, {
        path: resolved.input,
        rule: BoundaryRule.NotDirectory,
      });
    }
    await this.hooks.beforeOpen?.(resolved);
    const handle = await this.openBeneath(resolved, O_RDONLY | O_DIRECTORY);
    return { handle, resolved };
  }

  /**
   * Opens `name` inside an already opened folder without following a link there: the walkers of list and search
   * use it. Returns undefined for entries that are links, vanished, or the wrong kind.
   */
  async openEntry(
    dir: FileHandle,
    dirPath: string,
    name: string,
    kind: 'file' | 'directory',
  ): Promise<FileHandle | undefined> {
    const flags =
      kind === 'directory' ? O_RDONLY | O_DIRECTORY | O_NOFOLLOW : O_RDONLY | O_NOFOLLOW | O_NONBLOCK;
    try {
      return await open(this.childPath(dir, dirPath, name), flags);
    } catch {
      return undefined;
    }
  }

  /** A path naming the folder behind an open descriptor: `/proc/self/fd/N` on Linux, the checked path elsewhere. */
  descriptorPath(handle: FileHandle, fallback: string): string {
    return this.hasProcFd ? `/proc/self/fd/${handle.fd}` : fallback;
  }

  private childPath(dir: FileHandle, dirPath: string, name: string): string {
    return `${this.descriptorPath(dir, dirPath)}/${name}`;
  }

  private async openBeneath(
    resolved: ResolvedPath,
    finalFlags: number,
    options: { createDirs?: boolean } = {},
  ): Promise<FileHandle> {
    const segments = resolved.segments;
    const wantsDirectory = (finalFlags & O_DIRECTORY) !== 0;
    let dir: FileHandle | undefined = await open(this.root, O_RDONLY | O_DIRECTORY);
    let dirPath = this.root;
    try {
      for (const name of wantsDirectory ? segments : segments.slice(0, -1)) {
        const next: FileHandle = await this.openFolderStep(
          dir,
          dirPath,
          name,
          resolved,
          options.createDirs === true,
        );
        await dir.close();
        dir = next;
        dirPath = join(dirPath, name);
      }
      let opened: FileHandle;
      if (wantsDirectory) {
        opened = dir;
        dir = undefined;
      } else {
        const last = segments[segments.length - 1] as string;
        try {
          opened = await open(this.childPath(dir, dirPath, last), finalFlags | O_NOFOLLOW, 0o644);
        } catch (error) {
          throw await this.openFailure(error, dir, dirPath, last, resolved);
        }
      }
      await this.verifyDescriptor(opened, resolved);
      return opened;
    } finally {
      await dir?.close();
    }
  }

  private async openFolderStep(
    dir: FileHandle,
    dirPath: string,
    name: string,
    resolved: ResolvedPath,
    createDirs: boolean,
  ): Promise<FileHandle> {
    const target = this.childPath(dir, dirPath, name);
    try {
      return await open(target, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    } catch (error) {
      if (errnoCode(error) === 'ENOENT' && createDirs) {
        try {
          await mkdir(target, { mode: 0o755 });
        } catch (mkdirError) {
          if (errnoCode(mkdirError) !== 'EEXIST') throw fsError(mkdirError, resolved.input);
        }
        try {
          return await open(target, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        } catch (again) {
          throw await this.openFailure(again, dir, dirPath, name, resolved);
        }
      }
      throw await this.openFailure(error, dir, dirPath, name, resolved);
    }
  }

  private async openFailure(
    error: unknown,
    dir: FileHandle,
    dirPath: string,
    name: string,
    resolved: ResolvedPath,
  ): Promise<AgentMeshError> {
    const code = errnoCode(error);
    let isLink = code === 'ELOOP';
    if (code === 'ENOTDIR' || code === 'EEXIST') {
      isLink = await lstat(this.childPath(dir, dirPath, name)).then(
        (s) => s.isSymbolicLink(),
        () => false,
      );
    }
    if (isLink) {
      return denied(
        BoundaryRule.SymbolicLink,
        `${quote(resolved.input)}: "${name}" is a symbolic link at the moment of use; tools never follow a link there (it may have been swapped after the check)`,
        { path: resolved.input, name },
      );
    }
    if (code === 'ENOENT') {
      return notFound(`${quote(resolved.input)}: "${name}" does not exist (it may have been removed)`, {
        path: resolved.input,
      });
    }
    if (code === 'ENOTDIR') {
      return invalid(`${quote(resolved.input)}: "${name}" is not a folder`, {
        path: resolved.input,
        rule: BoundaryRule.NotDirectory,
      });
    }
    if (code === 'EEXIST') {
      return new AgentMeshError(
        ErrorCode.Conflict,
        `${quote(resolved.input)} already exists (mode "create")`,
        {
          details: { path: resolved.input },
        },
      );
    }
    return fsError(error, resolved.input);
  }

  /** On Linux, reads back where a descriptor really points and refuses anything outside the workspace. */
  private async verifyDescriptor(handle: FileHandle, resolved: ResolvedPath): Promise<void> {
    if (!this.hasProcFd) return;
    let actual: string;
    try {
      actual = await readlink(`/proc/self/fd/${handle.fd}`);
    } catch {
      return;
    }
    const rel = relative(this.root, actual);
    const ok = this.contains(actual);
    if (!ok || (rel !== '' && assertAccessSafe(this.config, rel.split(sep), resolved))) {
      await handle.close().catch(() => undefined);
      throw denied(
        BoundaryRule.PathChanged,
        `${quote(resolved.input)} changed between the check and the use and now points elsewhere; nothing was read or written`,
        { path: resolved.input },
      );
    }
  }
}

/** Refuses an opened path that is not a regular file, or a file with more than one hard link. */
async function checkOpenedFile(handle: FileHandle, resolved: ResolvedPath): Promise<Stats> {
  const fileStat = await handle.stat();
  if (!fileStat.isFile()) {
    throw denied(
      BoundaryRule.NotRegularFile,
      `${quote(resolved.input)} is not a regular file (device, pipe or socket)`,
      {
        path: resolved.input,
      },
    );
  }
  if (fileStat.nlink > 1) {
    throw denied(
      BoundaryRule.HardLink,
      `${quote(resolved.input)} has ${fileStat.nlink} hard links; tools refuse hard-linked files because another link may live outside the workspace`,
      { path: resolved.input, nlink: fileStat.nlink },
    );
  }
  return fileStat;
}

/** An error of the file system as the tool's error: denied, missing, or worth a retry later. */
function fsError(error: unknown, shown: string): AgentMeshError {
  const code = errnoCode(error);
  if (code === 'EACCES' || code === 'EPERM') {
    return new AgentMeshError(
      ErrorCode.PermissionDenied,
      `${quote(shown)}: the operating system denied access`,
      {
        details: { path: shown, errno: code },
        cause: error,
      },
    );
  }
  if (code === 'ENOENT') return notFound(`${quote(shown)} does not exist in the workspace`, { path: shown });
  if (code === 'ENOSPC' || code === 'EMFILE' || code === 'ENFILE' || code === 'EBUSY' || code === 'EAGAIN') {
    return new AgentMeshError(ErrorCode.Unavailable, `${quote(shown)}: ${code}, try again later`, {
      retryable: true,
      details: { path: shown, errno: code },
      cause: error,
    });
  }
  return AgentMeshError.from(error, ErrorCode.ToolError);
}

function kindOf(s: Stats): PathKind {
  if (s.isFile()) return 'file';
  if (s.isDirectory()) return 'directory';
  return 'other';
}

/** True when the descriptor's real location breaks an access rule (used after open, so it must not throw). */
function assertAccessSafe(
  config: ResolvedWorkspaceConfig,
  segments: string[],
  resolved: ResolvedPath,
): boolean {
  try {
    assertAccess(config, segments, resolved.access, resolved.input);
    return false;
  } catch {
    return true;
  }
}
