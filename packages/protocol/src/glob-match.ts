/**
 * Linear-time glob matching. A glob dialect compiles its pattern to {@link GlobToken}s; the tokens are matched by
 * carrying the set of reachable text positions through them, never backtracking, so one match costs at most
 * O(pattern length x text length) whatever the pattern. A RegExp built from a glob can instead backtrack
 * exponentially: `^[^.]*[^.]*...[^.]*z$` (40 stars) against a 27-character name does not finish.
 */

/** One element of a compiled glob. */
export type GlobToken =
  /** These characters, in order. */
  | { readonly kind: 'literal'; readonly text: string }
  /** Any one character but `except` (`?` is `{ kind: 'one', except: '/' }`). */
  | { readonly kind: 'one'; readonly except: string }
  /** One character that `test` accepts (a `[...]` class). */
  | { readonly kind: 'class'; readonly test: (char: string) => boolean }
  /** Any run of characters, none of them `except` when it is given (`*` within a segment, `**` across). */
  | { readonly kind: 'star'; readonly except?: string }
  /** Nothing, or any run of characters that ends with `separator` (a path's `**` then `/`: zero or more folders). */
  | { readonly kind: 'dirs'; readonly separator: string }
  /** Any one of these token lists (`{a,b}`); an empty list matches nothing. */
  | { readonly kind: 'alternatives'; readonly alternatives: readonly (readonly GlobToken[])[] };

export interface GlobMatchOptions {
  /** Literals compare as RegExp's `i` flag does (a `class` token folds case itself). */
  readonly caseInsensitive?: boolean;
}

/** Whether a whole text matches a compiled glob. */
export type GlobTest = (text: string) => boolean;

/** At most this many brace expansions are matched one by one (each through the fast paths below). */
const MAX_EXPANSIONS = 16;

/** Compiles glob tokens into a test that takes linear time in the text for a given pattern. */
export function compileGlobTokens(tokens: readonly GlobToken[], options: GlobMatchOptions = {}): GlobTest {
  const fold = options.caseInsensitive === true ? foldCase : undefined;
  const normalized = normalize(tokens, fold);
  const expansions = expand(normalized);
  if (expansions === undefined) return compileSequence(normalized, fold);
  const tests = expansions.map((expansion) => compileSequence(normalize(expansion, undefined), fold));
  return tests.length === 1 ? (tests[0] as GlobTest) : (text) => tests.some((test) => test(text));
}

/**
 * A test for normalized tokens: the leading and trailing literals compared in place, then what lies between them by
 * the cheapest way that is exact for it (one star, a greedy scan, or the set of reachable positions).
 */
function compileSequence(tokens: GlobToken[], fold: Fold | undefined): GlobTest {
  const middle = [...tokens];
  const prefix = middle[0]?.kind === 'literal' ? middle[0].text : '';
  if (prefix !== '') middle.shift();
  const last = middle.at(-1);
  const suffix = last?.kind === 'literal' ? last.text : '';
  if (suffix !== '') middle.pop();
  const matchMiddle = middleMatcher(middle, fold);
  return (text) => {
    const start = prefix.length;
    const end = text.length - suffix.length;
    if (end < start || !literalAt(text, 0, prefix, fold) || !literalAt(text, end, suffix, fold)) return false;
    return matchMiddle(text, start, end);
  };
}

type RangeTest = (text: string, start: number, end: number) => boolean;

function middleMatcher(middle: readonly GlobToken[], fold: Fold | undefined): RangeTest {
  if (middle.length === 0) return (_text, start, end) => start === end;
  const only = middle.length === 1 ? middle[0] : undefined;
  if (only?.kind === 'star') return (text, start, end) => !containsIn(text, start, end, only.except);
  const stars = middle.filter((t) => t.kind === 'star');
  const simple =
    fold === undefined && stars.length + middle.filter((t) => t.kind === 'literal').length === middle.length;
  const except = stars[0]?.except;
  if (simple && stars.every((t) => t.except === except)) {
    if (except === undefined) return (text, start, end) => greedy(middle, text, start, end);
    const segments = splitLiterals(middle, except);
    return (text, start, end) => segmentsMatch(segments, except, text, start, end);
  }
  return (text, start, end) => {
    const length = end - start;
    return advance(middle, { text, start, length, fold }, reachableAtStart(length))?.[length] === 1;
  };
}

function containsIn(text: string, start: number, end: number, char: string | undefined): boolean {
  if (char === undefined) return false;
  const at = text.indexOf(char, start);
  return at !== -1 && at < end;
}

/**
 * Literals and stars that all match any character of the range: leftmost-first placement of each literal is exact
 * (the classic wildcard scan), one pass over the range.
 */
function greedy(tokens: readonly GlobToken[], text: string, start: number, end: number): boolean {
  let from = 0;
  let to = tokens.length;
  const first = tokens[0];
  if (first?.kind === 'literal') {
    if (start + first.text.length > end || !text.startsWith(first.text, start)) return false;
    start += first.text.length;
    from = 1;
  }
  const last = tokens[to - 1];
  if (to > from && last?.kind === 'literal') {
    end -= last.text.length;
    if (end < start || !text.startsWith(last.text, end)) return false;
    to--;
  }
  if (from === to) return start === end;
  for (let i = from; i < to; i++) {
    const token = tokens[i] as GlobToken;
    if (token.kind !== 'literal') continue;
    const at = text.indexOf(token.text, start);
    if (at === -1 || at + token.text.length > end) return false;
    start = at + token.text.length;
  }
  return true;
}

/** Literals and stars that never match `separator`, cut at each separator the literals hold. */
function splitLiterals(tokens: readonly GlobToken[], separator: string): GlobToken[][] {
  const segments: GlobToken[][] = [[]];
  for (const token of tokens) {
    if (token.kind !== 'literal') {
      (segments.at(-1) as GlobToken[]).push(token);
      continue;
    }
    token.text.split(separator).forEach((text, i) => {
      if (i > 0) segments.push([]);
      if (text !== '') (segments.at(-1) as GlobToken[]).push({ kind: 'literal', text });
    });
  }
  return segments;
}

/** Each separator of the range lines up with one of the pattern's; each segment then matches by {@link greedy}. */
function segmentsMatch(
  segments: readonly GlobToken[][],
  separator: string,
  text: string,
  start: number,
  end: number,
): boolean {
  for (let i = 0; i < segments.length; i++) {
    const cut = text.indexOf(separator, start);
    const last = i === segments.length - 1;
    const stop = cut === -1 || cut >= end ? end : cut;
    if (last !== (stop === end)) return false;
    if (!greedy(segments[i] as GlobToken[], text, start, stop)) return false;
    start = stop + 1;
  }
  return true;
}

/** Every alternatives-free token list the tokens stand for, or undefined when there are more than a few. */
function expand(tokens: readonly GlobToken[]): GlobToken[][] | undefined {
  let lists: GlobToken[][] = [[]];
  for (const token of tokens) {
    if (token.kind !== 'alternatives') {
      for (const list of lists) list.push(token);
      continue;
    }
    const options: GlobToken[][] = [];
    for (const alternative of token.alternatives) {
      const expanded = expand(alternative);
      if (expanded === undefined) return undefined;
      options.push(...expanded);
    }
    if (lists.length * options.length > MAX_EXPANSIONS) return undefined;
    lists = lists.flatMap((list) => options.map((option) => [...list, ...option]));
  }
  return lists;
}

type Fold = (code: number) => number;

/** The part of the text being matched: `length` characters from `start`. */
interface Span {
  readonly text: string;
  readonly start: number;
  readonly length: number;
  readonly fold: Fold | undefined;
}

function reachableAtStart(length: number): Uint8Array {
  const positions = new Uint8Array(length + 1);
  positions[0] = 1;
  return positions;
}

/** Joins adjacent literals (case-folded when asked) and collapses runs of stars and folder runs into one. */
function normalize(tokens: readonly GlobToken[], fold: Fold | undefined): GlobToken[] {
  const out: GlobToken[] = [];
  for (const token of tokens) {
    const previous = out.at(-1);
    if (token.kind === 'literal') {
      const text = fold === undefined ? token.text : foldText(token.text, fold);
      if (previous?.kind === 'literal') out[out.length - 1] = { kind: 'literal', text: previous.text + text };
      else if (text !== '') out.push({ kind: 'literal', text });
    } else if (token.kind === 'alternatives') {
      out.push({ kind: 'alternatives', alternatives: token.alternatives.map((a) => normalize(a, fold)) });
    } else {
      const merged = previous === undefined ? undefined : mergeRun(previous, token);
      if (merged === undefined) out.push(token);
      else out[out.length - 1] = merged;
    }
  }
  return out;
}

/** One token matching what `a` then `b` match, if there is one (`**` then `*` is `**`; so are folders then `*`). */
function mergeRun(a: GlobToken, b: GlobToken): GlobToken | undefined {
  if (a.kind === 'star' && b.kind === 'star') return a.except === b.except ? a : unboundedStar(a, b);
  if (a.kind === 'dirs' && b.kind === 'dirs' && a.separator === b.separator) return a;
  const dirs = a.kind === 'dirs' ? a : b.kind === 'dirs' ? b : undefined;
  const star = a.kind === 'star' ? a : b.kind === 'star' ? b : undefined;
  if (dirs === undefined || star === undefined) return undefined;
  if (star.except === undefined || (a === dirs && star.except === dirs.separator)) return { kind: 'star' };
  return undefined;
}

function unboundedStar(a: { except?: string }, b: { except?: string }): GlobToken | undefined {
  return a.except === undefined || b.except === undefined ? { kind: 'star' } : undefined;
}

/** The positions reachable after `tokens`, from the positions in `from`; undefined when none is. */
function advance(tokens: readonly GlobToken[], span: Span, from: Uint8Array): Uint8Array | undefined {
  let positions: Uint8Array | undefined = from;
  for (const token of tokens) {
    positions = step(token, span, positions);
    if (positions === undefined) return undefined;
  }
  return positions;
}

function step(token: GlobToken, span: Span, from: Uint8Array): Uint8Array | undefined {
  const { text, start, length } = span;
  const to = new Uint8Array(length + 1);
  const first = from.indexOf(1);
  if (first === -1) return undefined;
  switch (token.kind) {
    case 'literal': {
      const { text: literal } = token;
      const lead = literal.charCodeAt(0);
      for (let p = first; p + literal.length <= length; p++)
        if (
          from[p] === 1 &&
          (span.fold !== undefined || text.charCodeAt(start + p) === lead) &&
          literalAt(text, start + p, literal, span.fold)
        )
          to[p + literal.length] = 1;
      break;
    }
    case 'one': {
      const except = token.except.charCodeAt(0);
      for (let p = first; p < length; p++)
        if (from[p] === 1 && text.charCodeAt(start + p) !== except) to[p + 1] = 1;
      break;
    }
    case 'class':
      for (let p = first; p < length; p++)
        if (from[p] === 1 && token.test(text[start + p] as string)) to[p + 1] = 1;
      break;
    case 'star': {
      const except = token.except === undefined ? -1 : token.except.charCodeAt(0);
      let run = false;
      for (let p = first; p <= length; p++) {
        run = from[p] === 1 || (run && text.charCodeAt(start + p - 1) !== except);
        if (run) to[p] = 1;
      }
      break;
    }
    case 'dirs': {
      const separator = token.separator.charCodeAt(0);
      let seen = false;
      for (let p = first; p <= length; p++) {
        if (from[p] === 1 || (seen && text.charCodeAt(start + p - 1) === separator)) to[p] = 1;
        if (from[p] === 1) seen = true;
      }
      break;
    }
    case 'alternatives':
      for (const alternative of token.alternatives) {
        const after = advance(alternative, span, from);
        if (after !== undefined) for (let p = first; p <= length; p++) if (after[p] === 1) to[p] = 1;
      }
      break;
  }
  return to.includes(1) ? to : undefined;
}

function literalAt(text: string, at: number, literal: string, fold: Fold | undefined): boolean {
  if (fold === undefined) return text.startsWith(literal, at);
  for (let i = 0; i < literal.length; i++)
    if (fold(text.charCodeAt(at + i)) !== literal.charCodeAt(i)) return false;
  return true;
}

function foldText(text: string, fold: Fold): string {
  let out = '';
  for (let i = 0; i < text.length; i++) out += String.fromCharCode(fold(text.charCodeAt(i)));
  return out;
}

/** RegExp's case folding without the `u` flag: upper case, unless that takes a non-ASCII character to ASCII. */
function foldCase(code: number): number {
  if (code < 128) return code >= 97 && code <= 122 ? code - 32 : code;
  const upper = String.fromCharCode(code).toUpperCase();
  return upper.length === 1 && upper.charCodeAt(0) >= 128 ? upper.charCodeAt(0) : code;
}
