import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';

/** Longest pattern the regex strategy accepts. */
export const MAX_REGEX_LENGTH = 256;
/** Most unbounded quantifiers (`*`, `+`, `{n,}`) one pattern may use. */
export const MAX_UNBOUNDED_QUANTIFIERS = 2;

function reject(pattern: string, reason: string): AgentMeshError {
  return new AgentMeshError(
    ErrorCode.InvalidRequest,
    `regex "${truncate(pattern)}" is not accepted: ${reason}`,
    {
      details: { field: 'query', pattern: truncate(pattern) },
    },
  );
}

function truncate(s: string): string {
  return s.length > 80 ? `${s.slice(0, 80)}...` : s;
}

interface GroupFrame {
  hasQuantifier: boolean;
  hasAlternation: boolean;
}

/**
 * Compiles a case-insensitive search pattern after checking that it cannot backtrack without end: no
 * backreferences or lookaround, no quantified group that holds a quantifier or an alternation (`(a+)+`, `(a|aa)*`),
 * at most {@link MAX_UNBOUNDED_QUANTIFIERS} unbounded quantifiers, at most {@link MAX_REGEX_LENGTH} characters.
 * Throws `invalid_request` naming the reason, also for patterns that do not compile.
 */
export function compileSafeRegex(pattern: string): RegExp {
  if (pattern.length === 0) throw reject(pattern, 'the pattern is empty');
  if (pattern.length > MAX_REGEX_LENGTH)
    throw reject(pattern, `it is ${pattern.length} characters long, the limit is ${MAX_REGEX_LENGTH}`);
  let compiled: RegExp;
  try {
    compiled = new RegExp(pattern, 'i');
  } catch (error) {
    throw reject(pattern, `it does not compile (${(error as Error).message})`);
  }
  checkStructure(pattern);
  return compiled;
}

function checkStructure(pattern: string): void {
  const stack: GroupFrame[] = [{ hasQuantifier: false, hasAlternation: false }];
  let unbounded = 0;
  let inClass = false;
  let lastClosedGroup: GroupFrame | undefined;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    const top = stack[stack.length - 1]!;
    if (c === '\\') {
      const next = pattern[i + 1] ?? '';
      if (!inClass && (/[1-9]/.test(next) || next === 'k'))
        throw reject(pattern, 'backreferences are not supported');
      i++;
      lastClosedGroup = undefined;
      continue;
    }
    if (inClass) {
      if (c === ']') inClass = false;
      continue;
    }
    if (c === '[') {
      inClass = true;
      lastClosedGroup = undefined;
      continue;
    }
    if (c === '(') {
      if (
        pattern.startsWith('(?=', i) ||
        pattern.startsWith('(?!', i) ||
        pattern.startsWith('(?<=', i) ||
        pattern.startsWith('(?<!', i)
      )
        throw reject(pattern, 'lookaround is not supported');
      stack.push({ hasQuantifier: false, hasAlternation: false });
      lastClosedGroup = undefined;
      continue;
    }
    if (c === ')') {
      const closed = stack.length > 1 ? stack.pop()! : top;
      const parent = stack[stack.length - 1]!;
      parent.hasQuantifier ||= closed.hasQuantifier;
      lastClosedGroup = closed;
      continue;
    }
    if (c === '|') {
      top.hasAlternation = true;
      lastClosedGroup = undefined;
      continue;
    }
    const quantifier = readQuantifier(pattern, i);
    if (quantifier !== undefined) {
      if (
        quantifier.repeats &&
        lastClosedGroup !== undefined &&
        (lastClosedGroup.hasQuantifier || lastClosedGroup.hasAlternation)
      )
        throw reject(
          pattern,
          lastClosedGroup.hasQuantifier
            ? 'a repeated group holds another quantifier (nested quantifiers can backtrack without end)'
            : 'a repeated group holds an alternation (it can backtrack without end)',
        );
      if (quantifier.unbounded && ++unbounded > MAX_UNBOUNDED_QUANTIFIERS)
        throw reject(
          pattern,
          `it uses more than ${MAX_UNBOUNDED_QUANTIFIERS} unbounded quantifiers (*, + or {n,})`,
        );
      if (quantifier.repeats) top.hasQuantifier = true;
      i += quantifier.length - 1;
      if (pattern[i + 1] === '?') i++;
      lastClosedGroup = undefined;
      continue;
    }
    lastClosedGroup = undefined;
  }
}

interface Quantifier {
  length: number;
  /** Matches more than once. */
  repeats: boolean;
  unbounded: boolean;
}

function readQuantifier(pattern: string, i: number): Quantifier | undefined {
  const c = pattern[i];
  if (c === '*' || c === '+') return { length: 1, repeats: true, unbounded: true };
  if (c === '?') return { length: 1, repeats: false, unbounded: false };
  if (c !== '{') return undefined;
  const m = /^\{(\d+)(,(\d*))?\}/.exec(pattern.slice(i, i + 24));
  if (m === null) return undefined;
  const min = Number(m[1]);
  const max = m[2] === undefined ? min : m[3] === '' ? Infinity : Number(m[3]);
  return { length: m[0].length, repeats: max > 1, unbounded: max === Infinity };
}
