import { compileGlobTokens, type GlobToken } from '@agentmesh/protocol';

/**
 * A small glob dialect for file filters and name denylists: `*` (within one segment), `**` (any depth), `?`,
 * `{a,b}` alternatives and `[...]` classes. A pattern without `/` matches the last path segment only.
 */
export interface GlobMatcher {
  readonly pattern: string;
  matches(relativePath: string): boolean;
}

const MAX_GLOB_LENGTH = 512;

export function compileGlob(pattern: string, options: { caseInsensitive?: boolean } = {}): GlobMatcher {
  if (pattern.length === 0 || pattern.length > MAX_GLOB_LENGTH) {
    throw new Error(
      `glob ${JSON.stringify(pattern.slice(0, 40))} must be 1 to ${MAX_GLOB_LENGTH} characters`,
    );
  }
  const basenameOnly = !pattern.includes('/');
  const caseInsensitive = options.caseInsensitive === true;
  const test = compileGlobTokens(globTokens(pattern.replace(/^\.\//, ''), caseInsensitive), {
    caseInsensitive,
  });
  return {
    pattern,
    matches(relativePath: string): boolean {
      return test(basenameOnly ? relativePath.slice(relativePath.lastIndexOf('/') + 1) : relativePath);
    },
  };
}

/** The tokens of a glob; each `{...}` holds its alternatives (matched without backtracking, however nested). */
function globTokens(glob: string, caseInsensitive: boolean): GlobToken[] {
  const open: { before: GlobToken[]; alternatives: GlobToken[][] }[] = [];
  let current: GlobToken[] = [];
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i] as string;
    const brace = open.at(-1);
    if (ch === '*') {
      const double = glob[i + 1] === '*';
      const dirs = double && glob[i + 2] === '/';
      current.push(dirs ? { kind: 'dirs', separator: '/' } : double ? { kind: 'star' } : SEGMENT_STAR);
      i += dirs ? 2 : double ? 1 : 0;
    } else if (ch === '?') {
      current.push({ kind: 'one', except: '/' });
    } else if (ch === '{') {
      open.push({ before: current, alternatives: [] });
      current = [];
    } else if (ch === ',' && brace !== undefined) {
      brace.alternatives.push(current);
      current = [];
    } else if (ch === '}' && brace !== undefined) {
      open.pop();
      brace.before.push({ kind: 'alternatives', alternatives: [...brace.alternatives, current] });
      current = brace.before;
    } else if (ch === '[' && glob.indexOf(']', i + 2) !== -1) {
      const close = glob.indexOf(']', i + 2);
      current.push(characterClass(glob.slice(i + 1, close), caseInsensitive));
      i = close;
    } else {
      current.push({ kind: 'literal', text: ch });
    }
  }
  if (open.length > 0) throw new Error(`glob ${JSON.stringify(glob)} has an unclosed "{"`);
  return current;
}

const SEGMENT_STAR: GlobToken = { kind: 'star', except: '/' };

/** `[abc]`, `[a-z]`, `[!a]`: one character, tested by a RegExp of that single class (which cannot backtrack). */
function characterClass(body: string, caseInsensitive: boolean): GlobToken {
  let source = body.replace(/\\/g, '\\\\');
  if (source.startsWith('!')) source = `^${source.slice(1)}`;
  const re = new RegExp(`^[${source}]$`, caseInsensitive ? 'i' : '');
  return { kind: 'class', test: (char) => re.test(char) };
}
