import { AgentMeshError, ErrorCode } from './errors.js';

/** Longest pattern the regex strategy accepts. */
export const MAX_REGEX_LENGTH = 256;
/** Most unbounded quantifiers (`*`, `+`, `{n,}`) one pattern may use. */
export const MAX_UNBOUNDED_QUANTIFIERS = 2;

/** How a pattern is compiled and how a refusal names it. */
export interface SafeRegexOptions {
  /** RegExp flags (default none). */
  flags?: string;
  /** The field the pattern came from, named in the refusal (default `pattern`). */
  field?: string;
  /** The error code of a refusal (default `invalid_request`). */
  code?: string;
}

class Refusal extends Error {}

function reject(pattern: string, reason: string): Refusal {
  return new Refusal(reason);
}

function truncate(s: string): string {
  return s.length > 80 ? `${s.slice(0, 80)}...` : s;
}

interface GroupFrame {
  hasQuantifier: boolean;
  hasAlternation: boolean;
}

/**
 * Compiles a pattern after checking that it cannot backtrack without end: no backreferences or lookaround, no
 * quantified group that holds a quantifier or an alternation (`(a+)+`, `(a|aa)*`), at most
 * {@link MAX_UNBOUNDED_QUANTIFIERS} unbounded quantifiers, at most {@link MAX_REGEX_LENGTH} characters. Throws
 * `invalid_request` (or `options.code`) naming the field and the reason, also for patterns that do not compile.
 */
export function compileSafeRegex(pattern: string, options: SafeRegexOptions = {}): RegExp {
  try {
    if (pattern.length === 0) throw reject(pattern, 'the pattern is empty');
    if (pattern.length > MAX_REGEX_LENGTH)
      throw reject(pattern, `it is ${pattern.length} characters long, the limit is ${MAX_REGEX_LENGTH}`);
    let compiled: RegExp;
    try {
      compiled = new RegExp(pattern, options.flags ?? '');
    } catch (error) {
      throw reject(pattern, `it does not compile (${(error as Error).message})`);
    }
    checkStructure(pattern);
    return compiled;
  } catch (error) {
    if (!(error instanceof Refusal)) throw error;
    const field = options.field ?? 'pattern';
    throw new AgentMeshError(
      options.code ?? ErrorCode.InvalidRequest,
      `${field}: regex "${truncate(pattern)}" is not accepted: ${error.message}`,
      { details: { field, pattern: truncate(pattern) } },
    );
  }
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
      if (LOOKAROUNDS.some((open) => pattern.startsWith(open, i)))
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
      if (quantifier.repeats && lastClosedGroup !== undefined) checkRepeatedGroup(pattern, lastClosedGroup);
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

const LOOKAROUNDS = ['(?=', '(?!', '(?<=', '(?<!'];

/** A group that a quantifier repeats may hold neither a quantifier nor an alternation: both backtrack without end. */
function checkRepeatedGroup(pattern: string, group: GroupFrame): void {
  if (group.hasQuantifier)
    throw reject(
      pattern,
      'a repeated group holds another quantifier (nested quantifiers can backtrack without end)',
    );
  if (group.hasAlternation)
    throw reject(pattern, 'a repeated group holds an alternation (it can backtrack without end)');
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

/**
 * The longest text, in UTF-16 code units, a pattern accepted by {@link compileSafeRegex} can match: `Infinity` when
 * it has an unbounded quantifier (`*`, `+`, `{n,}`). Assertions (`^`, `$`, `\b`) match nothing; with the `u` or `v`
 * flag every character counts as two units (a surrogate pair).
 */
export function maxMatchLength(pattern: string, flags = ''): number {
  const unit = flags.includes('u') || flags.includes('v') ? 2 : 1;
  return new LengthScan(pattern, unit).alternation();
}

/** A recursive-descent walk of a pattern that adds up the longest match of each part; `i` is where it is. */
class LengthScan {
  private i = 0;

  constructor(
    private readonly pattern: string,
    /** Code units a character counts for. */
    private readonly unit: number,
  ) {}

  alternation(): number {
    let longest = this.sequence();
    while (this.pattern[this.i] === '|') {
      this.i++;
      longest = Math.max(longest, this.sequence());
    }
    return longest;
  }

  private sequence(): number {
    let total = 0;
    while (this.i < this.pattern.length && this.pattern[this.i] !== '|' && this.pattern[this.i] !== ')') {
      const length = this.atom();
      const times = this.repeats();
      total += length === 0 ? 0 : length * times;
    }
    return total;
  }

  private atom(): number {
    const { pattern } = this;
    const c = pattern[this.i];
    if (c === '\\') return this.escape();
    if (c === '[') return this.klass();
    if (c === '(') {
      this.i++;
      if (pattern.startsWith('?:', this.i)) this.i += 2;
      else if (pattern.startsWith('?<', this.i)) this.skipTo('>');
      const inner = this.alternation();
      this.i++;
      return inner;
    }
    this.i++;
    return c === '^' || c === '$' ? 0 : this.unit;
  }

  private escape(): number {
    const { pattern } = this;
    const c = pattern[this.i + 1] ?? '';
    this.i += 2;
    if (c === 'b' || c === 'B') return 0;
    if ((c === 'u' || c === 'p' || c === 'P') && pattern[this.i] === '{') this.skipTo('}');
    else if (c === 'u') this.i += 4;
    else if (c === 'x') this.i += 2;
    else if (c === 'c') this.i += 1;
    return this.unit;
  }

  private klass(): number {
    const { pattern } = this;
    for (this.i++; this.i < pattern.length && pattern[this.i] !== ']'; this.i++)
      if (pattern[this.i] === '\\') this.i++;
    this.i++;
    return this.unit;
  }

  /** How many times the atom before may match: 1, a count, or Infinity. */
  private repeats(): number {
    const { pattern } = this;
    const c = pattern[this.i];
    let max = 1;
    if (c === '*' || c === '+') max = Infinity;
    else if (c === '?') max = 1;
    else if (c === '{') {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(pattern.slice(this.i, this.i + 24));
      if (m === null) return 1;
      max = m[2] === undefined ? Number(m[1]) : m[3] === '' ? Infinity : Number(m[3]);
      this.i += m[0].length - 1;
    } else return 1;
    this.i++;
    if (pattern[this.i] === '?') this.i++;
    return max;
  }

  private skipTo(close: string): void {
    const end = this.pattern.indexOf(close, this.i);
    this.i = end < 0 ? this.pattern.length : end + 1;
  }
}
