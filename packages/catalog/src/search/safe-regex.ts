import { compileSafeRegex as compileChecked } from '@agentmesh/protocol';

export { MAX_REGEX_LENGTH, MAX_UNBOUNDED_QUANTIFIERS } from '@agentmesh/protocol';

/**
 * Compiles a case-insensitive search pattern after the protocol's safe-regex check (no backreferences or lookaround,
 * no nested quantifiers, a bounded length); throws `invalid_request` naming the reason and the `query` field.
 */
export function compileSafeRegex(pattern: string): RegExp {
  return compileChecked(pattern, { flags: 'i', field: 'query' });
}
