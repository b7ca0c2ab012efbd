import type { Dirent } from 'node:fs';
import { lstat, readdir, type FileHandle } from 'node:fs/promises';
import type { ResolvedWorkspaceConfig } from './options.js';
import { accessProblem } from './path-rules.js';
import type { WorkspaceResolver } from './resolver.js';
import type { WorkspaceRuntime } from './runtime.js';
import { throwIfAborted } from './runtime.js';

export type EntryType = 'file' | 'directory' | 'symlink' | 'other';

/** One entry met by {@link walkWorkspace}. Files come with the folder handle they can be opened through. */
export interface WalkEntry {
  /** Workspace-relative path. */
  path: string;
  type: EntryType;
  depth: number;
  /** The open folder holding the entry and that folder's workspace-relative segments. */
  parent: FileHandle;
  parentAbsolute: string;
  name: string;
}

export interface WalkOptions {
  /** 1 lists only the folder's own entries. */
  maxDepth: number;
  signal: AbortSignal;
  /** Folder names not entered (they are still visited). */
  skipFolders?: ReadonlySet<string>;
  /** Return false to stop the walk. */
  visit: (entry: WalkEntry) => Promise<boolean | void> | boolean | void;
}

export interface WalkSummary {
  visited: number;
  /** Entries left out because they are protected or carry a sensitive name. */
  hidden: number;
  /** The walk stopped at the visit limit or because `visit` asked it to. */
  stopped: boolean;
}

function typeOf(entry: Dirent): EntryType {
  if (entry.isSymbolicLink()) return 'symlink';
  if (entry.isDirectory()) return 'directory';
  if (entry.isFile()) return 'file';
  return 'other';
}

/** What every folder of one walk shares: the resolver, the workspace config, the caller's options and the summary. */
interface WalkContext {
  resolver: WorkspaceResolver;
  config: ResolvedWorkspaceConfig;
  options: WalkOptions;
  summary: WalkSummary;
}

/** A folder's entries sorted by name, or undefined when the folder cannot be read. */
async function readSortedEntries(
  resolver: WorkspaceResolver,
  dir: FileHandle,
  absolute: string,
): Promise<Dirent[] | undefined> {
  let entries: Dirent[];
  try {
    entries = await readdir(resolver.descriptorPath(dir, absolute), { withFileTypes: true });
  } catch {
    return undefined;
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return entries;
}

/** Counts an entry as hidden or visited; returns false when it is hidden or the visit limit stops the walk. */
function admitEntry(walk: WalkContext, segments: readonly string[]): boolean {
  const { config, summary } = walk;
  if (accessProblem(config, segments, 'read') !== undefined) {
    summary.hidden++;
    return false;
  }
  if (summary.visited >= config.maxVisitedEntries) {
    summary.stopped = true;
    return false;
  }
  summary.visited++;
  return true;
}

/** Opens a subfolder beneath its parent's descriptor (skipped if it is no longer a folder) and walks it. */
async function walkSubfolder(
  walk: WalkContext,
  parent: { handle: FileHandle; absolute: string },
  name: string,
  segments: readonly string[],
  depth: number,
): Promise<void> {
  const child = await walk.resolver.openEntry(parent.handle, parent.absolute, name, 'directory');
  if (child === undefined) return;
  try {
    await walkFolder(walk, child, segments, `${parent.absolute}/${name}`, depth);
  } finally {
    await child.close();
  }
}

/** Visits a folder's admitted entries in name order and walks its subfolders down to the depth limit. */
async function walkFolder(
  walk: WalkContext,
  dir: FileHandle,
  segments: readonly string[],
  absolute: string,
  depth: number,
): Promise<void> {
  const { options, summary } = walk;
  throwIfAborted(options.signal);
  const entries = await readSortedEntries(walk.resolver, dir, absolute);
  if (entries === undefined) return;
  for (const dirent of entries) {
    if (summary.stopped) return;
    const childSegments = [...segments, dirent.name];
    if (!admitEntry(walk, childSegments)) continue;
    const type = typeOf(dirent);
    const entry: WalkEntry = {
      path: childSegments.join('/'),
      type,
      depth,
      parent: dir,
      parentAbsolute: absolute,
      name: dirent.name,
    };
    if ((await options.visit(entry)) === false) {
      summary.stopped = true;
      return;
    }
    if (type === 'directory' && depth < options.maxDepth && options.skipFolders?.has(dirent.name) !== true) {
      await walkSubfolder(walk, { handle: dir, absolute }, dirent.name, childSegments, depth + 1);
    }
  }
}

/**
 * Walks a folder through open descriptors, never following a link and never entering protected folders; entries
 * with sensitive names are hidden. Each subfolder is opened beneath its parent's descriptor, so a folder swapped for
 * a link during the walk is skipped rather than followed.
 */
export async function walkWorkspace(
  runtime: WorkspaceRuntime,
  start: { handle: FileHandle; segments: readonly string[]; absolute: string },
  options: WalkOptions,
): Promise<WalkSummary> {
  const { resolver, config } = runtime;
  const summary: WalkSummary = { visited: 0, hidden: 0, stopped: false };
  await walkFolder({ resolver, config, options, summary }, start.handle, start.segments, start.absolute, 1);
  return summary;
}

/** Size of an entry without following a link. */
export async function entrySize(runtime: WorkspaceRuntime, entry: WalkEntry): Promise<number | undefined> {
  try {
    const s = await lstat(
      `${runtime.resolver.descriptorPath(entry.parent, entry.parentAbsolute)}/${entry.name}`,
    );
    return s.size;
  } catch {
    return undefined;
  }
}
