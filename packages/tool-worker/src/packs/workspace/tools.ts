import { defineTool, type Tool } from '../../define-tool.js';
import {
  ListFilesInput,
  ListFilesOutput,
  ReadFileInput,
  ReadFileOutput,
  SearchFilesInput,
  SearchFilesOutput,
  WriteFileInput,
  WriteFileOutput,
  listFiles,
  readFile,
  searchFiles,
  writeFile,
} from './fs-handlers.js';
import { GitInspectInput, GitInspectOutput, gitInspect } from './git-handlers.js';
import type { WorkspaceOptions } from './options.js';
import type { ResolverHooks } from './resolver.js';
import { createWorkspaceRuntime, type WorkspaceRuntime } from './runtime.js';
import {
  ReadCommandOutputInput,
  ReadCommandOutputOutput,
  RunCommandInput,
  RunCommandOutput,
  readCommandOutput,
  runCommand,
} from './shell-handlers.js';

/** The canonical names of the workspace pack, fixed by the contract. */
export const WORKSPACE_TOOL_NAMES = [
  'fs.read_file',
  'fs.write_file',
  'fs.list_files',
  'fs.search_files',
  'shell.run_command',
  'shell.read_command_output',
  'git.inspect',
] as const;

/** One instance of the workspace pack: its tools and a `close` that kills the commands it still runs. */
export interface WorkspacePack {
  tools: Tool[];
  /** Real path of the workspace root. */
  root: string;
  close(): Promise<void>;
}

const HANDLE_WAIT_MARGIN_MS = 10_000;

function buildTools(runtime: WorkspaceRuntime): Tool[] {
  const needsConfirmation = runtime.config.confirm !== undefined;
  const fsRead = { read_only: true, filesystem: true } as const;
  const shellTimeout = runtime.config.shellTimeoutMs + HANDLE_WAIT_MARGIN_MS;
  return [
    defineTool({
      name: 'fs.read_file',
      description:
        'Read a text file in the workspace. Paths are relative to the workspace root. Large files come in pages: pass offset (bytes) and max_bytes; the result says the next offset.',
      input: ReadFileInput,
      output: ReadFileOutput,
      safety: fsRead,
      idempotent: true,
      handler: (args, ctx) => readFile(runtime, args, ctx),
    }),
    defineTool({
      name: 'fs.write_file',
      description:
        'Write a file in the workspace (overwrite, append, or create only if absent). Paths are relative to the workspace root; create_dirs makes missing folders.',
      input: WriteFileInput,
      output: WriteFileOutput,
      safety: { mutating: true, filesystem: true, needs_confirmation: needsConfirmation },
      idempotent: false,
      retry: { max_attempts: 1 },
      handler: (args, ctx) => writeFile(runtime, args, ctx),
    }),
    defineTool({
      name: 'fs.list_files',
      description:
        'List the files and folders in a workspace folder (recursive on request). Links are shown, not followed; protected and sensitive entries are left out.',
      input: ListFilesInput,
      output: ListFilesOutput,
      safety: fsRead,
      idempotent: true,
      handler: (args, ctx) => listFiles(runtime, args, ctx),
    }),
    defineTool({
      name: 'fs.search_files',
      description:
        'Search the text of workspace files for a string or a regular expression, optionally limited by include/exclude globs such as "**/*.ts". Skips binary files, .git and node_modules (search inside them by passing path). Returns path, line, column and the matching line.',
      input: SearchFilesInput,
      output: SearchFilesOutput,
      safety: fsRead,
      idempotent: true,
      handler: (args, ctx) => searchFiles(runtime, args, ctx),
    }),
    defineTool({
      name: 'shell.run_command',
      description:
        'Run a program in the workspace, given as argv (["git", "status"]); no shell runs, so pipes, redirects and $VARS do not work. Only allowed command prefixes run. Returns exit code and output; with background_after_ms a long command returns a handle to read later with shell.read_command_output.',
      input: RunCommandInput,
      output: RunCommandOutput,
      safety: { mutating: true, process: true, filesystem: true, needs_confirmation: needsConfirmation },
      idempotent: false,
      timeoutMs: shellTimeout,
      retry: { max_attempts: 1 },
      handler: (args, ctx) => runCommand(runtime, args, ctx),
    }),
    defineTool({
      name: 'shell.read_command_output',
      description:
        'Read the stdout or stderr of a command started by shell.run_command: a page from an offset, or the tail; wait_ms waits for new output or the end.',
      input: ReadCommandOutputInput,
      output: ReadCommandOutputOutput,
      safety: { read_only: true, process: true },
      idempotent: true,
      timeoutMs: 30_000 + HANDLE_WAIT_MARGIN_MS,
      handler: (args, ctx) => readCommandOutput(runtime, args, ctx),
    }),
    defineTool({
      name: 'git.inspect',
      description:
        'Inspect the git repository of the workspace with a read-only subcommand: status, log, diff, show or blame. Options go in args (e.g. ["--oneline", "-n5"]), files in paths.',
      input: GitInspectInput,
      output: GitInspectOutput,
      safety: { read_only: true, process: true, filesystem: true },
      idempotent: true,
      timeoutMs: shellTimeout,
      handler: (args, ctx) => gitInspect(runtime, args, ctx),
    }),
  ];
}

/**
 * Creates the workspace pack for one root. Every path goes through one resolver; commands run argv-first with a
 * scrubbed environment. Throws `invalid_config` naming a bad option.
 */
export function createWorkspacePack(options: WorkspaceOptions, hooks: ResolverHooks = {}): WorkspacePack {
  const runtime = createWorkspaceRuntime(options, hooks);
  return { tools: buildTools(runtime), root: runtime.config.rootReal, close: () => runtime.commands.close() };
}

/** The tools of the workspace pack (`fs.*`, `shell.*`, `git.inspect`) for `options.root`. */
export function workspaceTools(options: WorkspaceOptions): Tool[] {
  return createWorkspacePack(options).tools;
}
