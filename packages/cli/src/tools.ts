import {
  AgentMeshError,
  ErrorCode,
  matchesAnyToolPattern,
  matchesToolPattern,
  type Logger,
} from '@agentmesh/protocol';
import {
  BUILTIN_TOOL_NAMES,
  builtinTools,
  createWorkspacePack,
  WORKSPACE_TOOL_NAMES,
  type ConfirmationRequest,
  type Tool,
} from '@agentmesh/tool-worker';
import type { AgentMeshConfig } from './config.js';
import { closest } from './suggest.js';

export const TOOL_PACKS = ['builtin', 'workspace'] as const;

/** The canonical names of the tools in each pack. */
export function packTools(): Record<(typeof TOOL_PACKS)[number], string[]> {
  return { builtin: [...BUILTIN_TOOL_NAMES], workspace: [...WORKSPACE_TOOL_NAMES] };
}

export interface ToolSelection {
  /** Pack names and/or tool names, namespaces or globs (`--tools`). */
  select?: string[] | undefined;
  workspace?: string | undefined;
  config: AgentMeshConfig;
  confirm?: ((request: ConfirmationRequest) => Promise<boolean>) | undefined;
  logger?: Logger;
}

export interface SelectedTools {
  tools: Tool[];
  /** Stops what the packs keep running (background commands of the workspace pack). */
  close(): Promise<void>;
  /** The workspace root when the workspace pack is served (the worker watches daemons' `watch_paths` there). */
  workspaceRoot?: string;
}

/**
 * The tools a worker serves: the builtin pack, the workspace pack when a workspace is given, narrowed by `--tools`
 * entries that are pack names or tool patterns.
 */
export function selectTools(selection: ToolSelection): SelectedTools {
  const { config } = selection;
  const root = selection.workspace ?? process.env['AGENTMESH_WORKSPACE'] ?? config.workspace?.root;
  const entries = selection.select ?? config.tools?.packs ?? [];
  const packs = new Set<string>(entries.filter((e) => (TOOL_PACKS as readonly string[]).includes(e)));
  const patterns = entries.filter((e) => !(TOOL_PACKS as readonly string[]).includes(e));
  if (packs.size === 0) {
    packs.add('builtin');
    if (root !== undefined) packs.add('workspace');
  }
  if (packs.has('workspace') && root === undefined)
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      'the workspace pack needs a workspace: pass --workspace DIR (or set AGENTMESH_WORKSPACE or workspace.root)',
    );
  const tools: Tool[] = [];
  const closers: (() => Promise<void>)[] = [];
  if (packs.has('builtin')) tools.push(...builtinTools());
  if (packs.has('workspace') && root !== undefined) {
    const { root: _configuredRoot, ...workspaceConfig } = config.workspace ?? {};
    const pack = createWorkspacePack({
      ...workspaceConfig,
      root,
      ...(selection.confirm ? { confirm: selection.confirm } : {}),
    });
    tools.push(...pack.tools);
    closers.push(() => pack.close());
  }
  try {
    resolveToolEntries(patterns, { tools: tools.map((t) => t.spec.name) });
  } catch (error) {
    void Promise.all(closers.map((close) => close()));
    throw error;
  }
  const chosen =
    patterns.length === 0 ? tools : tools.filter((t) => matchesAnyToolPattern(t.spec.name, patterns));
  return {
    tools: chosen,
    ...(packs.has('workspace') && root !== undefined ? { workspaceRoot: root } : {}),
    close: async () => {
      await Promise.all(closers.map((close) => close()));
    },
  };
}

/** What `--tools` entries are checked against: the tool names, and the packs with the tools each holds. */
export interface KnownTools {
  tools: readonly string[];
  packs?: Readonly<Record<string, readonly string[]>>;
}

/**
 * Resolves `--tools` entries (pack names, canonical names, namespaces, globs) to the canonical names they select.
 * An entry that selects nothing is a usage error naming it, with the closest known names.
 */
export function resolveToolEntries(entries: readonly string[], known: KnownTools): string[] {
  const selected = new Set<string>();
  for (const entry of entries) {
    const pack = known.packs?.[entry];
    if (pack !== undefined && pack.length === 0)
      throw new AgentMeshError(
        ErrorCode.InvalidRequest,
        `--tools: the ${entry} pack serves no tool here${entry === 'workspace' ? ': pass --workspace DIR' : ''}`,
        { details: { usage: true, entry } },
      );
    const matches = pack ?? known.tools.filter((name) => matchesToolPattern(name, entry));
    if (matches.length === 0) {
      const namespaces = [...new Set(known.tools.map((n) => n.split('.')[0]!))];
      const near = closest(entry, [...Object.keys(known.packs ?? {}), ...namespaces, ...known.tools]);
      throw new AgentMeshError(
        ErrorCode.InvalidRequest,
        `--tools: "${entry}" matches no tool${near.length > 0 ? ` (did you mean ${near.join(', ')}?)` : ''}; ` +
          `accepted: pack names (${TOOL_PACKS.join(', ')}), tool names, namespaces (${namespaces.join(', ')}) and globs`,
        { details: { usage: true, entry, known: known.tools } },
      );
    }
    for (const name of matches) selected.add(name);
  }
  return [...selected];
}
