export { workspaceTools, createWorkspacePack, WORKSPACE_TOOL_NAMES, type WorkspacePack } from './tools.js';
export {
  DEFAULT_ALLOW_ARGV_PREFIXES,
  DEFAULT_DENYLIST,
  DEFAULT_PROTECTED,
  DEFAULT_PROTECTED_WRITES,
  type ConfirmationRequest,
  type WorkspaceOptions,
} from './options.js';
export { BoundaryRule } from './errors.js';
export { GIT_READ_SUBCOMMANDS } from './git-options.js';
export { compileGlob, type GlobMatcher } from './glob.js';
