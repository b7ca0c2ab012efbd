import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { realpath } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { watchBases } from './daemon-watch.js';

let base: string;
let root: string;

beforeAll(async () => {
  base = await realpath(mkdtempSync(join(tmpdir(), 'agentmesh-bases-')));
  root = join(base, 'ws');
  mkdirSync(join(root, 'src', 'lib'), { recursive: true });
  mkdirSync(join(root, 'docs'), { recursive: true });
  mkdirSync(join(base, 'outside'));
  symlinkSync(join(base, 'outside'), join(root, 'out'));
});

afterAll(() => rmSync(base, { recursive: true, force: true }));

describe('watchBases', () => {
  it('watches the literal leading directories of each glob, none nested in another', () => {
    expect(watchBases(root, ['src/lib/**/*.ts', 'src/**', 'docs/*.md'])).toEqual(['docs', 'src']);
  });

  it('a glob without "/" matches at any depth: the whole root', () => {
    expect(watchBases(root, ['*.md', 'src/**'])).toEqual(['']);
  });

  it('falls back to the nearest existing directory, and never watches through a symlink leading out', () => {
    expect(watchBases(root, ['gen/later/**'])).toEqual(['']);
    expect(watchBases(root, ['out/**', 'docs/**'])).toEqual(['docs']);
  });
});
