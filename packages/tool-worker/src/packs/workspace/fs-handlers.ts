import { z } from 'zod';
import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';
import { invalid, quote } from './errors.js';
import { compileGlob, type GlobMatcher } from './glob.js';
import {
  confirmOrRefuse,
  cutNotice,
  throwIfAborted,
  type WorkspaceCallContext,
  type WorkspaceRuntime,
} from './runtime.js';
import { entrySize, walkWorkspace, type EntryType, type WalkEntry } from './walk.js';

const PathArg = z.string().min(1).max(4096);

export const ReadFileInput = z
  .object({
    path: PathArg.describe('File path relative to the workspace root, e.g. "src/index.ts"'),
    offset: z.number().int().min(0).default(0).describe('Byte offset to start reading at'),
    max_bytes: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('Most bytes to return (capped by the workspace limit)'),
    encoding: z.enum(['utf8', 'base64']).default('utf8'),
  })
  .strict();
export const ReadFileOutput = z.object({
  path: z.string(),
  size: z.number().int(),
  offset: z.number().int(),
  bytes_read: z.number().int(),
  encoding: z.enum(['utf8', 'base64']),
  content: z.string(),
  truncated: z.boolean(),
  next_offset: z.number().int().optional(),
  binary: z.boolean().optional(),
  notice: z.string().optional(),
});
export type ReadFileArgs = z.output<typeof ReadFileInput>;
export type ReadFileResult = z.output<typeof ReadFileOutput>;

export async function readFile(
  runtime: WorkspaceRuntime,
  args: ReadFileArgs,
  ctx: WorkspaceCallContext,
): Promise<ReadFileResult> {
  throwIfAborted(ctx.signal);
  const limit = Math.min(args.max_bytes ?? runtime.config.maxReadBytes, runtime.config.maxReadBytes);
  const opened = await runtime.resolver.openFileForRead(args.path);
  try {
    const size = opened.stat.size;
    const offset = Math.min(args.offset, size);
    const buffer = Buffer.alloc(Math.min(limit, size - offset));
    let filled = 0;
    while (filled < buffer.length) {
      throwIfAborted(ctx.signal);
      const { bytesRead } = await opened.handle.read(buffer, filled, buffer.length - filled, offset + filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    const data = buffer.subarray(0, filled);
    const end = offset + filled;
    const truncated = end < size;
    const binary = args.encoding === 'utf8' && data.includes(0);
    const result: ReadFileResult = {
      path: opened.resolved.relative,
      size,
      offset,
      bytes_read: filled,
      encoding: args.encoding,
      content: binary ? '' : data.toString(args.encoding),
      truncated,
    };
    if (truncated) {
      result.next_offset = end;
      result.notice = cutNotice(
        'file truncated',
        filled,
        size,
        `call fs.read_file with offset ${end} for more`,
      );
    }
    if (binary) {
      result.binary = true;
      result.notice =
        'the file looks binary (it holds NUL bytes); read it with encoding "base64" if you need its bytes';
    }
    return result;
  } finally {
    await opened.handle.close();
  }
}

export const WriteFileInput = z
  .object({
    path: PathArg.describe('File path relative to the workspace root'),
    content: z.string().describe('The text to write (or base64 when encoding is "base64")'),
    encoding: z.enum(['utf8', 'base64']).default('utf8'),
    mode: z
      .enum(['overwrite', 'append', 'create'])
      .default('overwrite')
      .describe('overwrite replaces the file, append adds to its end, create fails if it exists'),
    create_dirs: z.boolean().default(false).describe('Create missing parent folders'),
  })
  .strict();
export const WriteFileOutput = z.object({
  path: z.string(),
  bytes_written: z.number().int(),
  size: z.number().int(),
  created: z.boolean(),
});
export type WriteFileArgs = z.output<typeof WriteFileInput>;
export type WriteFileResult = z.output<typeof WriteFileOutput>;

export async function writeFile(
  runtime: WorkspaceRuntime,
  args: WriteFileArgs,
  ctx: WorkspaceCallContext,
): Promise<WriteFileResult> {
  throwIfAborted(ctx.signal);
  const data = Buffer.from(args.content, args.encoding);
  if (data.length > runtime.config.maxWriteBytes) {
    throw new AgentMeshError(
      ErrorCode.PayloadTooLarge,
      `content is ${data.length} bytes; fs.write_file accepts at most ${runtime.config.maxWriteBytes} bytes per call (use mode "append" for more)`,
      { retryable: false, details: { bytes: data.length, limit: runtime.config.maxWriteBytes } },
    );
  }
  const checked = await runtime.resolver.resolve(args.path, { access: 'write', mustExist: false });
  await confirmOrRefuse(
    runtime,
    ctx,
    'fs.write_file',
    `write ${data.length} bytes to ${checked.relative} (${args.mode})`,
    {
      path: args.path,
      mode: args.mode,
      bytes: data.length,
    },
  );
  const opened = await runtime.resolver.openFileForWrite(args.path, {
    mode: args.mode,
    createDirs: args.create_dirs,
  });
  try {
    throwIfAborted(ctx.signal);
    if (args.mode === 'overwrite') await opened.handle.truncate(0);
    let written = 0;
    while (written < data.length) {
      const position = args.mode === 'append' ? null : written;
      const { bytesWritten } = await opened.handle.write(data, written, data.length - written, position);
      written += bytesWritten;
    }
    const after = await opened.handle.stat();
    return {
      path: opened.resolved.relative,
      bytes_written: written,
      size: after.size,
      created: opened.created,
    };
  } finally {
    await opened.handle.close();
  }
}

export const ListFilesInput = z
  .object({
    path: PathArg.default('.').describe('Folder relative to the workspace root ("." is the root)'),
    recursive: z.boolean().default(false),
    max_depth: z
      .number()
      .int()
      .min(1)
      .max(32)
      .optional()
      .describe('How deep to go when recursive (default 8)'),
    max_entries: z.number().int().min(1).max(5000).default(500),
  })
  .strict();
const EntrySchema = z.object({
  path: z.string(),
  type: z.enum(['file', 'directory', 'symlink', 'other']),
  size: z.number().int().optional(),
});
export const ListFilesOutput = z.object({
  path: z.string(),
  entries: z.array(EntrySchema),
  truncated: z.boolean(),
  hidden: z.number().int(),
  notice: z.string().optional(),
});
export type ListFilesArgs = z.output<typeof ListFilesInput>;
export type ListFilesResult = z.output<typeof ListFilesOutput>;

export async function listFiles(
  runtime: WorkspaceRuntime,
  args: ListFilesArgs,
  ctx: WorkspaceCallContext,
): Promise<ListFilesResult> {
  throwIfAborted(ctx.signal);
  const { handle, resolved } = await runtime.resolver.openDirectory(args.path);
  const entries: { path: string; type: EntryType; size?: number }[] = [];
  let truncated = false;
  try {
    const summary = await walkWorkspace(
      runtime,
      { handle, segments: resolved.segments, absolute: resolved.real },
      {
        maxDepth: args.recursive ? (args.max_depth ?? 8) : 1,
        signal: ctx.signal,
        visit: async (entry) => {
          if (entries.length >= args.max_entries) {
            truncated = true;
            return false;
          }
          const item: { path: string; type: EntryType; size?: number } = {
            path: entry.path,
            type: entry.type,
          };
          if (entry.type === 'file') {
            const size = await entrySize(runtime, entry);
            if (size !== undefined) item.size = size;
          }
          entries.push(item);
          return true;
        },
      },
    );
    truncated ||= summary.stopped;
    const result: ListFilesResult = { path: resolved.relative, entries, truncated, hidden: summary.hidden };
    const notes: string[] = [];
    if (truncated)
      notes.push(`listing stopped at ${entries.length} entries; list a subfolder or raise max_entries`);
    if (summary.hidden > 0) notes.push(`${summary.hidden} protected or sensitive entries are not shown`);
    if (notes.length > 0) result.notice = notes.join('; ');
    return result;
  } finally {
    await handle.close();
  }
}

export const SearchFilesInput = z
  .object({
    query: z.string().min(1).max(1000).describe('Text to find, or a regular expression when regex is true'),
    regex: z.boolean().default(false),
    case_sensitive: z.boolean().default(false),
    path: PathArg.default('.').describe('Folder to search, relative to the workspace root'),
    include: z
      .array(z.string().min(1).max(512))
      .max(32)
      .optional()
      .describe('Globs a file must match, e.g. ["**/*.ts"]'),
    exclude: z.array(z.string().min(1).max(512)).max(32).optional().describe('Globs of files to skip'),
    max_matches: z.number().int().min(1).max(1000).default(100),
  })
  .strict();
const MatchSchema = z.object({
  path: z.string(),
  line: z.number().int(),
  column: z.number().int(),
  text: z.string(),
});
export const SearchFilesOutput = z.object({
  matches: z.array(MatchSchema),
  files_scanned: z.number().int(),
  skipped: z.object({ binary: z.number().int(), too_large: z.number().int(), linked: z.number().int() }),
  truncated: z.boolean(),
  notice: z.string().optional(),
});
export type SearchFilesArgs = z.output<typeof SearchFilesInput>;
export type SearchFilesResult = z.output<typeof SearchFilesOutput>;

const MAX_LINE_SCAN = 4000;
/** Folders a search does not enter unless it starts inside them: repository internals and installed packages. */
const SEARCH_SKIPPED_FOLDERS: ReadonlySet<string> = new Set(['.git', 'node_modules']);
const MAX_MATCH_TEXT = 300;
const NESTED_QUANTIFIER = /\((?:[^()\\]|\\.)*[+*]\)?\)[+*{]|\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)[+*{]/;

function compileMatcher(args: SearchFilesArgs): (line: string) => number {
  if (!args.regex) {
    const needle = args.case_sensitive ? args.query : args.query.toLowerCase();
    return (line) => (args.case_sensitive ? line : line.toLowerCase()).indexOf(needle);
  }
  if (NESTED_QUANTIFIER.test(args.query)) {
    throw invalid(
      `regex ${quote(args.query)} nests quantifiers (like (a+)+), which can take exponential time; simplify it`,
      { query: args.query },
    );
  }
  let re: RegExp;
  try {
    re = new RegExp(args.query, args.case_sensitive ? 'u' : 'iu');
  } catch (error) {
    throw invalid(`regex ${quote(args.query)} does not compile: ${(error as Error).message}`, {
      query: args.query,
    });
  }
  return (line) => line.search(re);
}

function compileGlobs(globs: readonly string[] | undefined, argument: string): GlobMatcher[] {
  return (globs ?? []).map((g) => {
    try {
      return compileGlob(g);
    } catch (error) {
      throw invalid(`${argument}: ${(error as Error).message}`);
    }
  });
}

type SearchSkips = SearchFilesResult['skipped'];
type SearchMatch = z.output<typeof MatchSchema>;

/** A walked file's text if search may read it: not linked, not over the size limit, not binary (counted in `skipped`). */
async function searchableText(
  runtime: WorkspaceRuntime,
  entry: WalkEntry,
  skipped: SearchSkips,
): Promise<string | undefined> {
  const file = await runtime.resolver.openEntry(entry.parent, entry.parentAbsolute, entry.name, 'file');
  if (file === undefined) return undefined;
  try {
    const s = await file.stat();
    if (!s.isFile() || s.nlink > 1) {
      skipped.linked += s.nlink > 1 ? 1 : 0;
      return undefined;
    }
    if (s.size > runtime.config.maxSearchFileBytes) {
      skipped.too_large++;
      return undefined;
    }
    const data = await file.readFile();
    if (data.subarray(0, 8192).includes(0)) {
      skipped.binary++;
      return undefined;
    }
    return data.toString('utf8');
  } finally {
    await file.close();
  }
}

/** Appends the file's matching lines; false once `max` matches are held and another line matched. */
function collectMatches(
  path: string,
  text: string,
  match: (line: string) => number,
  matches: SearchMatch[],
  max: number,
): boolean {
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = (lines[i] as string).slice(0, MAX_LINE_SCAN);
    const column = match(line);
    if (column < 0) continue;
    if (matches.length >= max) return false;
    matches.push({ path, line: i + 1, column: column + 1, text: line.slice(0, MAX_MATCH_TEXT) });
  }
  return true;
}

export async function searchFiles(
  runtime: WorkspaceRuntime,
  args: SearchFilesArgs,
  ctx: WorkspaceCallContext,
): Promise<SearchFilesResult> {
  throwIfAborted(ctx.signal);
  const match = compileMatcher(args);
  const include = compileGlobs(args.include, 'include');
  const exclude = compileGlobs(args.exclude, 'exclude');
  const { handle, resolved } = await runtime.resolver.openDirectory(args.path);
  const matches: SearchMatch[] = [];
  const skipped: SearchSkips = { binary: 0, too_large: 0, linked: 0 };
  let filesScanned = 0;
  let truncated = false;
  const visit = async (entry: WalkEntry): Promise<boolean> => {
    if (entry.type === 'symlink') {
      skipped.linked++;
      return true;
    }
    if (entry.type !== 'file') return true;
    if (include.length > 0 && !include.some((g) => g.matches(entry.path))) return true;
    if (exclude.some((g) => g.matches(entry.path))) return true;
    const text = await searchableText(runtime, entry, skipped);
    if (text === undefined) return true;
    filesScanned++;
    throwIfAborted(ctx.signal);
    truncated = !collectMatches(entry.path, text, match, matches, args.max_matches);
    return !truncated;
  };
  try {
    const summary = await walkWorkspace(
      runtime,
      { handle, segments: resolved.segments, absolute: resolved.real },
      { maxDepth: 64, signal: ctx.signal, skipFolders: SEARCH_SKIPPED_FOLDERS, visit },
    );
    truncated ||= summary.stopped;
    const result: SearchFilesResult = { matches, files_scanned: filesScanned, skipped, truncated };
    if (truncated)
      result.notice = `search stopped at ${matches.length} matches; narrow the query, path or include globs`;
    return result;
  } finally {
    await handle.close();
  }
}
