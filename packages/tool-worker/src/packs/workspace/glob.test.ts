import { describe, expect, it } from 'vitest';
import { compileGlob } from './glob.js';

/**
 * The RegExp the dialect used to compile to (with `**` spanning line breaks too): the oracle for short patterns,
 * where its backtracking is harmless.
 */
function regexOracle(pattern: string, caseInsensitive: boolean): (path: string) => boolean {
  const glob = pattern.replace(/^\.\//, '');
  let source = '';
  let braces = 0;
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i] as string;
    const close = ch === '[' ? glob.indexOf(']', i + 2) : -1;
    if (ch === '*' && glob[i + 1] === '*') {
      source += glob[i + 2] === '/' ? '(?:[^]*/)?' : '[^]*';
      i += glob[i + 2] === '/' ? 2 : 1;
    } else if (ch === '*') source += '[^/]*';
    else if (ch === '?') source += '[^/]';
    else if (ch === '{') {
      braces++;
      source += '(?:';
    } else if (ch === '}' && braces > 0) {
      braces--;
      source += ')';
    } else if (ch === ',' && braces > 0) source += '|';
    else if (close !== -1) {
      const body = glob.slice(i + 1, close).replace(/\\/g, '\\\\');
      source += `[${body.startsWith('!') ? `^${body.slice(1)}` : body}]`;
      i = close;
    } else source += ch.replace(/[.+^$()|\\\]{}[]/g, '\\$&');
  }
  const re = new RegExp(`^${source}$`, caseInsensitive ? 'i' : '');
  const basenameOnly = !pattern.includes('/');
  return (path) => re.test(basenameOnly ? path.slice(path.lastIndexOf('/') + 1) : path);
}

describe('workspace globs', () => {
  it('agree with the RegExp they replace on 20,000 random short patterns and paths', () => {
    let seed = 7;
    const pick = <T>(items: readonly T[]): T => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return items[(seed >>> 12) % items.length] as T;
    };
    const parts = [
      'a',
      'B',
      '/',
      '*',
      '**',
      '**/',
      '?',
      '{',
      '}',
      ',',
      '[ab]',
      '[!a]',
      '[a-c]',
      '.',
      '\\',
      '{a,b}',
    ];
    const chars = ['a', 'b', 'A', '/', '.', 'c', '\\', 'é', 'É'];
    let compared = 0;
    for (let k = 0; k < 4_000; k++) {
      const pattern = Array.from({ length: 1 + (k % 8) }, () => pick(parts)).join('');
      const caseInsensitive = k % 2 === 1;
      let oracle: ((path: string) => boolean) | undefined;
      try {
        oracle = regexOracle(pattern, caseInsensitive);
      } catch {
        expect(() => compileGlob(pattern, { caseInsensitive })).toThrow();
        continue;
      }
      const glob = compileGlob(pattern, { caseInsensitive });
      for (let j = 0; j < 5; j++) {
        const path = Array.from({ length: (k + j) % 9 }, () => pick(chars)).join('');
        expect(glob.matches(path), `${pattern} ${caseInsensitive ? '(i) ' : ''}on ${path}`).toBe(
          oracle(path),
        );
        compared++;
      }
    }
    expect(compared).toBeGreaterThan(15_000);
  });
});
