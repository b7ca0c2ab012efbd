import { AgentMeshError, ErrorCode, matchesAnyToolPattern, type Logger } from '@agentmesh/protocol';
import {
  builtinTools,
  createWorkspacePack,
  type ConfirmationRequest,
  type Tool,
} from '@agentmesh/tool-worker';
import type { AgentMeshConfig } from './config.js';

export const TOOL_PACKS = ['builtin', 'workspace'] as const;

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
  const chosen =
    patterns.length === 0 ? tools : tools.filter((t) => matchesAnyToolPattern(t.spec.name, patterns));
  if (chosen.length === 0)
    throw new AgentMeshError(ErrorCode.InvalidConfig, `--tools ${entries.join(',')} selects no tool`, {
      details: { available: tools.map((t) => t.spec.name) },
    });
  return {
    tools: chosen,
    close: async () => {
      await Promise.all(closers.map((close) => close()));
    },
  };
}
