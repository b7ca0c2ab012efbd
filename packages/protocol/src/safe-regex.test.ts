import { describe, expect, it } from 'vitest';
import { MAX_REGEX_LENGTH, compileSafeRegex, maxMatchLength } from './safe-regex.js';

describe('compileSafeRegex', () => {
  it('compiles patterns that cannot backtrack without end', () => {
    for (const pattern of ['^[a-z]+\\.[a-z_]+$', 'fs\\.(read|write)_file', '(ab){2,3}c*', '\\d{3}-\\d{4}'])
      expect(compileSafeRegex(pattern).test('x')).toBeTypeOf('boolean');
    expect(compileSafeRegex('ABC', { flags: 'i' }).test('abc')).toBe(true);
  });

  it.each([
    ['(a+)+', 'a repeated group holds another quantifier'],
    ['(x*y)*z', 'a repeated group holds another quantifier'],
    ['(a|aa)*', 'a repeated group holds an alternation'],
    ['(?:a|b){2,}', 'a repeated group holds an alternation'],
    ['(a)\\1', 'backreferences are not supported'],
    ['(?<n>a)\\k<n>', 'backreferences are not supported'],
    ['a(?=b)', 'lookaround is not supported'],
    ['(?<!a)b', 'lookaround is not supported'],
    ['a*b+c{2,}', 'it uses more than 2 unbounded quantifiers'],
    ['', 'the pattern is empty'],
    ['(', 'it does not compile'],
  ])('refuses %j: %s', (pattern, reason) => {
    expect(() => compileSafeRegex(pattern, { field: 'rules[0].match' })).toThrow(
      expect.objectContaining({
        code: 'invalid_request',
        message: expect.stringContaining(`rules[0].match: regex "${pattern}" is not accepted: ${reason}`),
      }),
    );
  });

  it('refuses a pattern over the length limit, with the code asked for', () => {
    const long = 'a'.repeat(MAX_REGEX_LENGTH + 1);
    expect(() => compileSafeRegex(long, { code: 'invalid_config' })).toThrow(
      expect.objectContaining({
        code: 'invalid_config',
        message: expect.stringContaining('the limit is 256'),
      }),
    );
  });

  it('reads an escaped bracket or quantifier inside a class as a character', () => {
    expect(compileSafeRegex('([+*]x)+').test('+x*x')).toBe(true);
    expect(compileSafeRegex('[\\]|]+').test(']|')).toBe(true);
  });
});

describe('maxMatchLength', () => {
  it.each([
    ['abc', '', 3],
    ['a|bcd|ef', '', 3],
    ['^a\\bb$', '', 2],
    ['[a-z]{2,5}x?', '', 6],
    ['(?:ab|c){3}', '', 6],
    ['(?<year>\\d{4})-\\d\\d', '', 7],
    ['\\u{1F600}\\x41\\cA', 'u', 6],
    ['\\p{L}{2}', 'u', 4],
    ['a+', '', Infinity],
    ['x{3,}', '', Infinity],
  ])('%j with flags %j matches at most %d code units', (pattern, flags, length) => {
    expect(maxMatchLength(pattern, flags)).toBe(length);
  });
});
