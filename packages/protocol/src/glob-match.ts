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

/** Compiles glob tokens into a test that takes linear time in the text for a given pattern. */
export function compileGlobTokens(tokens: readonly GlobToken[], options: GlobMatchOptions = {}): GlobTest {
  const fold = options.caseInsensitive === true ? foldCase : undefined;
  const middle = normalize(tokens, fold);
  const prefix = middle[0]?.kind === 'literal' ? middle[0].text : '';
  if (prefix !== '') middle.shift();
  const last = middle.at(-1);
  const suffix = last?.kind === 'literal' ? last.text : '';
  if (suffix !== '') middle.pop();
  const only = middle.length === 1 ? middle[0] : undefined;
  return (text) => {
    const start = prefix.length;
    const end = text.length - suffix.length;
    if (end < start || !literalAt(text, 0, prefix, fold) || !literalAt(text, end, suffix, fold)) return false;
    if (middle.length === 0) return start === end;
    if (only?.kind === 'star') return starSpans(text, start, end, only.except);
    const length = end - start;
    const after = advance(middle, { text, start, length, fold }, reachableAtStart(length));
    return after?.[length] === 1;
  };
}

/** Whether one star covers `text` from `start` to `end`: none of those characters is `except`. */
function starSpans(text: string, start: number, end: number, except: string | undefined): boolean {
  if (except === undefined) return true;
  const at = text.indexOf(except, start);
  return at === -1 || at >= end;
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

/** Joins adjacent literals (case-folded when asked) and collapses runs of equivalent stars. */
function normalize(tokens: readonly GlobToken[], fold: Fold | undefined): GlobToken[] {
  const out: GlobToken[] = [];
  for (const token of tokens) {
    const previous = out.at(-1);
    if (token.kind === 'literal') {
      const text = fold === undefined ? token.text : foldText(token.text, fold);
      if (previous?.kind === 'literal') out[out.length - 1] = { kind: 'literal', text: previous.text + text };
      else if (text !== '') out.push({ kind: 'literal', text });
    } else if (token.kind === 'star' && previous?.kind === 'star') {
      if (previous.except !== token.except) out[out.length - 1] = unboundedStar(previous, token);
    } else if (token.kind === 'alternatives') {
      out.push({ kind: 'alternatives', alternatives: token.alternatives.map((a) => normalize(a, fold)) });
    } else {
      out.push(token);
    }
  }
  return out;
}

function unboundedStar(a: { except?: string }, b: { except?: string }): GlobToken {
  return a.except === undefined || b.except === undefined
    ? { kind: 'star' }
    : { kind: 'star', except: a.except };
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
  let reached = false;
  const reach = (p: number) => {
    to[p] = 1;
    reached = true;
  };
  switch (token.kind) {
    case 'literal':
      for (let p = 0; p + token.text.length <= length; p++)
        if (from[p] === 1 && literalAt(text, start + p, token.text, span.fold)) reach(p + token.text.length);
      break;
    case 'one':
      for (let p = 0; p < length; p++) if (from[p] === 1 && text[start + p] !== token.except) reach(p + 1);
      break;
    case 'class':
      for (let p = 0; p < length; p++)
        if (from[p] === 1 && token.test(text[start + p] as string)) reach(p + 1);
      break;
    case 'star':
      for (let p = 0; p <= length; p++)
        if (from[p] === 1 || (p > 0 && to[p - 1] === 1 && text[start + p - 1] !== token.except)) reach(p);
      break;
    case 'dirs': {
      let seen = false;
      for (let p = 0; p <= length; p++) {
        if (from[p] === 1 || (seen && text[start + p - 1] === token.separator)) reach(p);
        if (from[p] === 1) seen = true;
      }
      break;
    }
    case 'alternatives':
      for (const alternative of token.alternatives) {
        const after = advance(alternative, span, from);
        if (after === undefined) continue;
        for (let p = 0; p <= length; p++) if (after[p] === 1) reach(p);
      }
      break;
  }
  return reached ? to : undefined;
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
