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
  const source = globToRegexSource(pattern.replace(/^\.\//, ''));
  const regex = new RegExp(`^${source}$`, options.caseInsensitive ? 'i' : '');
  return {
    pattern,
    matches(relativePath: string): boolean {
      const target = basenameOnly ? relativePath.slice(relativePath.lastIndexOf('/') + 1) : relativePath;
      return regex.test(target);
    },
  };
}

function globToRegexSource(glob: string): string {
  let out = '';
  let braceDepth = 0;
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i] as string;
    if (ch === '*') {
      if (glob[i + 1] === '*') {
        const slashAfter = glob[i + 2] === '/';
        out += slashAfter ? '(?:.*/)?' : '.*';
        i += slashAfter ? 2 : 1;
      } else {
        out += '[^/]*';
      }
    } else if (ch === '?') {
      out += '[^/]';
    } else if (ch === '{') {
      braceDepth++;
      out += '(?:';
    } else if (ch === '}' && braceDepth > 0) {
      braceDepth--;
      out += ')';
    } else if (ch === ',' && braceDepth > 0) {
      out += '|';
    } else if (ch === '[') {
      const close = glob.indexOf(']', i + 2);
      if (close === -1) {
        out += '\\[';
      } else {
        let body = glob.slice(i + 1, close).replace(/\\/g, '\\\\');
        if (body.startsWith('!')) body = `^${body.slice(1)}`;
        out += `[${body}]`;
        i = close;
      }
    } else {
      out += ch.replace(/[.+^$()|\\\]{}]/g, '\\$&');
    }
  }
  if (braceDepth > 0) throw new Error(`glob ${JSON.stringify(glob)} has an unclosed "{"`);
  return out;
}
