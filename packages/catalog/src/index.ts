export {
  createToolIndex,
  clampSearchLimit,
  parameterText,
  DEFAULT_SEARCH_LIMIT,
  MAX_SEARCH_LIMIT,
  MAX_QUERY_LENGTH,
  REGEX_SCAN_CHARS,
  type IndexableTool,
  type ToolIndex,
  type ToolIndexOptions,
  type ToolSearchHit,
  type ToolSearchOptions,
} from './search/tool-index.js';
export { compileSafeRegex, MAX_REGEX_LENGTH, MAX_UNBOUNDED_QUANTIFIERS } from './search/safe-regex.js';
export { tokenize, stem } from '@agentmesh/protocol';
export {
  Catalog,
  CATALOG_QUEUE,
  CATALOG_VERSION,
  DEFAULT_MAX_REQUEST_BYTES,
  DEFAULT_WORKER_TTL_MS,
  type CatalogOptions,
} from './catalog.js';
export { resolveToolLoading, isToolAllowed, type ExposureLayer } from '@agentmesh/protocol';
export {
  CatalogKeys,
  canonicalJson,
  compareVersions,
  specHash,
  type LiveTool,
  type WorkerRecord,
} from './registry.js';
export {
  RegistrationPolicy,
  parseRegistrationRoles,
  inNamespaces,
  type RegistrationRoles,
} from './role-policy.js';
export { droppedSafety } from './downgrade.js';
export { checkRegister } from './registration.js';
