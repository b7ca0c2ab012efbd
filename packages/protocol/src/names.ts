import { AgentMeshError, ErrorCode } from './errors.js';
import { compileGlobTokens, type GlobTest, type GlobToken } from './glob-match.js';

/** Canonical tool names: lowercase dotted segments, at most 64 characters, no `__`. */
export const TOOL_NAME_PATTERN = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$/;
export const TOOL_NAME_MAX_LENGTH = 64;
/** What LLM providers accept as a function name. */
export const PROVIDER_NAME_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;

/** Returns why `name` is not a canonical tool name, or undefined when it is one. */
export function toolNameProblem(name: unknown): string | undefined {
  if (typeof name !== 'string') return 'a tool name must be a string';
  if (name.length === 0) return 'a tool name must not be empty';
  if (name.length > TOOL_NAME_MAX_LENGTH)
    return `tool name "${name}" is longer than ${TOOL_NAME_MAX_LENGTH} characters`;
  if (name.includes('__')) return `tool name "${name}" contains "__", which is reserved for provider aliases`;
  if (!TOOL_NAME_PATTERN.test(name))
    return `tool name "${name}" must be lowercase dotted segments like "fs.read_file" (${TOOL_NAME_PATTERN.source})`;
  if (providerAliasLength(name) > 64)
    return `tool name "${name}" becomes longer than 64 characters as a provider name`;
  return undefined;
}

/** The length of {@link toProviderAlias}(name), counted without building it: each `.` becomes two characters. */
function providerAliasLength(name: string): number {
  let length = name.length;
  for (let i = 0; i < name.length; i++) if (name.charCodeAt(i) === 46) length++;
  return length;
}

export function isToolName(name: unknown): name is string {
  return toolNameProblem(name) === undefined;
}

/** Throws an `invalid_tool_name` error when `name` is not canonical. */
export function assertToolName(name: unknown): asserts name is string {
  const problem = toolNameProblem(name);
  if (problem !== undefined)
    throw new AgentMeshError(ErrorCode.InvalidToolName, problem, { details: { name } });
}

/** `fs.read_file` -> `fs__read_file`: the name a provider sees. */
export function toProviderAlias(name: string): string {
  return name.replaceAll('.', '__');
}

/** `fs__read_file` -> `fs.read_file`: reverses {@link toProviderAlias}. */
export function fromProviderAlias(alias: string): string {
  return alias.replaceAll('__', '.');
}

/** The namespace of a tool: its first segment (`fs` for `fs.read_file`). */
export function toolNamespace(name: string): string {
  const dot = name.indexOf('.');
  return dot === -1 ? name : name.slice(0, dot);
}

/** The longest tool-name pattern a request may carry (`tools`, `deferred`, `always`, `approvals.require`...). */
export const TOOL_PATTERN_MAX_LENGTH = 128;
/** The most tool-name patterns one list of a request may hold. */
export const TOOL_PATTERN_LIST_MAX = 256;

/**
 * Whether a tool name matches an allow-list entry: an exact name, a namespace prefix (`fs` matches `fs.read_file`
 * and `fs.x.y`), or a glob where `*` matches within a segment and `**` across segments. A glob matches without
 * backtracking: at worst in time proportional to the name's length times the pattern's, whatever the pattern.
 */
export function matchesToolPattern(name: string, pattern: string): boolean {
  if (pattern === name || pattern === '*' || pattern === '**') return true;
  if (!pattern.includes('*')) return name.startsWith(pattern + '.');
  return toolGlob(pattern)(name);
}

const globCache = new Map<string, GlobTest>();
function toolGlob(glob: string): GlobTest {
  let test = globCache.get(glob);
  if (test === undefined) {
    const tokens = glob
      .split(/(\*\*|\*)/)
      .map((part): GlobToken =>
        part === '**'
          ? { kind: 'star' }
          : part === '*'
            ? { kind: 'star', except: '.' }
            : { kind: 'literal', text: part },
      );
    test = compileGlobTokens(tokens);
    if (globCache.size > 1024) globCache.clear();
    globCache.set(glob, test);
  }
  return test;
}

export function matchesAnyToolPattern(name: string, patterns: readonly string[]): boolean {
  return patterns.some((p) => matchesToolPattern(name, p));
}
