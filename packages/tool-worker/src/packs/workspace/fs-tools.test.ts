import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
  existsSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentMeshError } from '@agentmesh/protocol';
import { createWorkspacePack, workspaceTools, type WorkspacePack } from './tools.js';
import { compileGlob } from './glob.js';
import { parseWorkspacePath } from './path-rules.js';

let root: string;
let pack: WorkspacePack;
const invoke = (name: string, args: unknown, p: WorkspacePack = pack) => {
  const tool = p.tools.find((t) => t.name === name);
  if (!tool) throw new Error(name);
  return tool.invoke(args) as Promise<any>;
};

beforeAll(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'agentmesh-ws-fs-')));
  mkdirSync(join(root, 'src', 'deep'), { recursive: true });
  writeFileSync(join(root, 'src', 'a.ts'), 'const alpha = 1;\nconst beta = 2;\n// TODO alpha\n');
  writeFileSync(join(root, 'src', 'deep', 'b.ts'), 'export function Alpha() {}\n');
  writeFileSync(join(root, 'src', 'c.md'), 'alpha in markdown\n');
  writeFileSync(join(root, 'bin.dat'), Buffer.from([0, 1, 2, 97, 108, 112, 104, 97]));
  writeFileSync(join(root, 'big.txt'), 'x'.repeat(200_000));
  pack = createWorkspacePack({ root, max_read_bytes: 100_000 });
});
afterAll(async () => {
  await pack.close();
  rmSync(root, { recursive: true, force: true });
});

describe('the workspace pack', () => {
  it('exposes the seven contract tools with the right safety metadata', () => {
    const tools = workspaceTools({ root });
    expect(tools.map((t) => t.name).sort()).toEqual(
      [
        'fs.list_files',
        'fs.read_file',
        'fs.search_files',
        'fs.write_file',
        'git.inspect',
        'shell.read_command_output',
        'shell.run_command',
      ].sort(),
    );
    const safety = Object.fromEntries(tools.map((t) => [t.name, t.spec.safety]));
    for (const name of ['fs.write_file', 'shell.run_command']) {
      expect(safety[name]).toMatchObject({ mutating: true, read_only: false, needs_confirmation: false });
    }
    for (const name of [
      'fs.read_file',
      'fs.list_files',
      'fs.search_files',
      'shell.read_command_output',
      'git.inspect',
    ]) {
      expect(safety[name]).toMatchObject({ read_only: true, mutating: false });
    }
    const confirmed = workspaceTools({ root, confirm: async () => true });
    expect(confirmed.find((t) => t.name === 'fs.write_file')?.spec.safety.needs_confirmation).toBe(true);
    expect(confirmed.find((t) => t.name === 'shell.run_command')?.spec.safety.needs_confirmation).toBe(true);
  });

  it('refuses bad configuration naming the key', () => {
    expect(() => workspaceTools({ root: join(root, 'missing') })).toThrow(/workspace\.root/);
    expect(() => workspaceTools({ root, protected: ['../up'] })).toThrow(/workspace\.protected/);
    expect(() => workspaceTools({ root, allow_argv_prefixes: [[]] })).toThrow(
      /workspace\.allow_argv_prefixes/,
    );
    expect(() => workspaceTools({ root, shell_timeout_ms: 0 })).toThrow(/workspace\.shell_timeout_ms/);
    expect(() => workspaceTools({ root: '/' })).toThrow(/file-system root/);
  });
});

describe('fs.read_file', () => {
  it('reads a file and pages a large one with a visible notice', async () => {
    expect(await invoke('fs.read_file', { path: 'src/a.ts' })).toMatchObject({
      path: 'src/a.ts',
      content: expect.stringContaining('alpha'),
      truncated: false,
    });
    const first = await invoke('fs.read_file', { path: 'big.txt' });
    expect(first).toMatchObject({
      bytes_read: 100_000,
      truncated: true,
      next_offset: 100_000,
      size: 200_000,
    });
    expect(first.notice).toMatch(/offset 100000/);
    const second = await invoke('fs.read_file', {
      path: 'big.txt',
      offset: first.next_offset,
      max_bytes: 150_000,
    });
    expect(second).toMatchObject({ bytes_read: 100_000, truncated: false, offset: 100_000 });
  });

  it('says when a file is binary and reads it as base64 on request', async () => {
    expect(await invoke('fs.read_file', { path: 'bin.dat' })).toMatchObject({ binary: true, content: '' });
    const b64 = await invoke('fs.read_file', { path: 'bin.dat', encoding: 'base64' });
    expect(Buffer.from(b64.content, 'base64')).toEqual(readFileSync(join(root, 'bin.dat')));
  });

  it('answers not_found and a folder hint', async () => {
    await expect(invoke('fs.read_file', { path: 'nope.txt' })).rejects.toMatchObject({ code: 'not_found' });
    await expect(invoke('fs.read_file', { path: 'src' })).rejects.toMatchObject({
      code: 'invalid_arguments',
      message: expect.stringMatching(/fs\.list_files/),
    });
  });
});

describe('fs.write_file', () => {
  it('overwrites, appends, creates folders and refuses to clobber in create mode', async () => {
    expect(
      await invoke('fs.write_file', { path: 'out/new.txt', content: 'one', create_dirs: true }),
    ).toMatchObject({ created: true, bytes_written: 3, path: 'out/new.txt' });
    await invoke('fs.write_file', { path: 'out/new.txt', content: '-two', mode: 'append' });
    expect(readFileSync(join(root, 'out/new.txt'), 'utf8')).toBe('one-two');
    await invoke('fs.write_file', { path: 'out/new.txt', content: 'z' });
    expect(readFileSync(join(root, 'out/new.txt'), 'utf8')).toBe('z');
    await expect(
      invoke('fs.write_file', { path: 'out/new.txt', content: 'q', mode: 'create' }),
    ).rejects.toMatchObject({ code: 'conflict' });
    await expect(invoke('fs.write_file', { path: 'nodir/x.txt', content: 'q' })).rejects.toMatchObject({
      code: 'not_found',
      message: expect.stringMatching(/create_dirs/),
    });
  });

  it('caps the size of a write', async () => {
    const small = createWorkspacePack({ root, max_write_bytes: 10 });
    await expect(
      invoke('fs.write_file', { path: 'cap.txt', content: 'x'.repeat(11) }, small),
    ).rejects.toMatchObject({ code: 'payload_too_large' });
    expect(existsSync(join(root, 'cap.txt'))).toBe(false);
  });

  it('asks the confirmation hook and does nothing when the answer is no', async () => {
    const asked: string[] = [];
    const no = createWorkspacePack({ root, confirm: async (r) => (asked.push(r.summary), false) });
    await expect(invoke('fs.write_file', { path: 'declined.txt', content: 'x' }, no)).rejects.toMatchObject({
      code: 'permission_denied',
      details: { rule: 'declined' },
    });
    expect(asked).toEqual(['write 1 bytes to declined.txt (overwrite)']);
    expect(existsSync(join(root, 'declined.txt'))).toBe(false);
    const yes = createWorkspacePack({ root, confirm: async () => true });
    await invoke('fs.write_file', { path: 'approved.txt', content: 'x' }, yes);
    expect(readFileSync(join(root, 'approved.txt'), 'utf8')).toBe('x');
  });
});

describe('fs.list_files and fs.search_files', () => {
  it('lists one level or recursively', async () => {
    const top = await invoke('fs.list_files', { path: 'src' });
    expect(top.entries.map((e: { path: string }) => e.path)).toEqual(['src/a.ts', 'src/c.md', 'src/deep']);
    const all = await invoke('fs.list_files', { path: 'src', recursive: true });
    expect(all.entries).toContainEqual({ path: 'src/deep/b.ts', type: 'file', size: 27 });
    const capped = await invoke('fs.list_files', { recursive: true, max_entries: 2 });
    expect(capped).toMatchObject({ truncated: true, notice: expect.stringMatching(/max_entries/) });
  });

  it('searches text, regex, case and globs, and skips binary files', async () => {
    const text = await invoke('fs.search_files', { query: 'alpha' });
    expect(text.matches.map((m: { path: string; line: number }) => `${m.path}:${m.line}`)).toEqual([
      'src/a.ts:1',
      'src/a.ts:3',
      'src/c.md:1',
      'src/deep/b.ts:1',
    ]);
    expect(text.skipped.binary).toBe(1);
    const cased = await invoke('fs.search_files', { query: 'Alpha', case_sensitive: true });
    expect(cased.matches).toEqual([
      { path: 'src/deep/b.ts', line: 1, column: 17, text: 'export function Alpha() {}' },
    ]);
    const re = await invoke('fs.search_files', {
      query: '^const \\w+ = 2',
      regex: true,
      include: ['**/*.ts'],
    });
    expect(re.matches).toHaveLength(1);
    const md = await invoke('fs.search_files', { query: 'alpha', include: ['*.md'] });
    expect(md.matches.map((m: { path: string }) => m.path)).toEqual(['src/c.md']);
    const excluded = await invoke('fs.search_files', { query: 'alpha', exclude: ['src/deep/**'] });
    expect(excluded.matches.some((m: { path: string }) => m.path.startsWith('src/deep'))).toBe(false);
    const capped = await invoke('fs.search_files', { query: 'alpha', max_matches: 2 });
    expect(capped).toMatchObject({ truncated: true, matches: expect.any(Array) });
    expect(capped.matches).toHaveLength(2);
  });

  it('refuses regexes that do not compile or nest quantifiers', async () => {
    await expect(invoke('fs.search_files', { query: '(a', regex: true })).rejects.toMatchObject({
      code: 'invalid_arguments',
    });
    await expect(invoke('fs.search_files', { query: '(a+)+$', regex: true })).rejects.toMatchObject({
      code: 'invalid_arguments',
      message: expect.stringMatching(/nests quantifiers/),
    });
  });
});

describe('path rules and globs', () => {
  it('splits clean relative paths', () => {
    expect(parseWorkspacePath('./src//a.ts')).toEqual(['src', 'a.ts']);
    expect(parseWorkspacePath('.')).toEqual([]);
    expect(parseWorkspacePath('caf\u00e9/na\u00efve.txt')).toEqual(['caf\u00e9', 'na\u00efve.txt']);
    expect(() => parseWorkspacePath('')).toThrow(AgentMeshError);
  });

  it('matches globs on base names or whole paths', () => {
    expect(compileGlob('*.ts').matches('src/deep/b.ts')).toBe(true);
    expect(compileGlob('src/*.ts').matches('src/deep/b.ts')).toBe(false);
    expect(compileGlob('src/**/*.ts').matches('src/deep/b.ts')).toBe(true);
    expect(compileGlob('src/**/*.ts').matches('src/a.ts')).toBe(true);
    expect(compileGlob('*.{ts,md}').matches('c.md')).toBe(true);
    expect(compileGlob('.env*', { caseInsensitive: true }).matches('.ENV.local')).toBe(true);
    expect(compileGlob('a?c').matches('abc')).toBe(true);
  });

  it('keeps the dialect: "**/" is zero or more folders, {a,b} nests, [...] and [!...] are classes', () => {
    expect(compileGlob('**/*.ts').matches('a.ts')).toBe(true);
    expect(compileGlob('src/**').matches('src/a/b/c.md')).toBe(true);
    expect(compileGlob('src/**/b/*.ts').matches('src/b/x.ts')).toBe(true);
    expect(compileGlob('src/**/b/*.ts').matches('src/a/c/b/x.ts')).toBe(true);
    expect(compileGlob('src/**/b/*.ts').matches('src/ab/x.ts')).toBe(false);
    expect(compileGlob('{src/{a,b},lib}/*.js').matches('src/b/x.js')).toBe(true);
    expect(compileGlob('{src/{a,b},lib}/*.js').matches('src/c/x.js')).toBe(false);
    expect(compileGlob('*.{ts,}').matches('notes.')).toBe(true);
    expect(compileGlob('[a-c]?.md').matches('bx.md')).toBe(true);
    expect(compileGlob('[!a-c]?.md').matches('bx.md')).toBe(false);
    expect(compileGlob('[A-C]*.MD', { caseInsensitive: true }).matches('docs/bx.md')).toBe(true);
    expect(compileGlob('a?c').matches('a/c')).toBe(false);
    expect(() => compileGlob('{a,b')).toThrow(/unclosed/);
  });

  const deepPath = Array.from({ length: 60 }, () => 'a').join('/');
  it.each([
    ['"**/" 40 times then "z"', '**/'.repeat(40) + 'z', deepPath, deepPath + '/z'],
    ['"**" 40 times then "z"', '**'.repeat(40) + 'z', 'a'.repeat(4000), 'a'.repeat(4000) + 'z'],
    ['"*a" 60 times then "!"', '*a'.repeat(60) + '!', 'a'.repeat(300), 'a'.repeat(300) + '!'],
    ['"{a,a}" 40 times then "b"', '{a,a}'.repeat(40) + 'b', 'a'.repeat(60), 'a'.repeat(40) + 'b'],
    [
      'nested {a,{a,...}} then "b"',
      '{a,'.repeat(40) + 'a' + '}'.repeat(40) + '*'.repeat(10) + 'b',
      'a'.repeat(60),
      'ab',
    ],
    [
      '"{*,**/}" 30 times then "z"',
      '{*a,**/}'.repeat(30) + 'z',
      'a/'.repeat(40) + 'a',
      'a/'.repeat(40) + 'z',
    ],
  ])('answers a backtracking glob (%s) at once', (_label, pattern, missing, matching) => {
    for (const caseInsensitive of [false, true]) {
      const started = performance.now();
      const glob = compileGlob(pattern, { caseInsensitive });
      expect(glob.matches(missing)).toBe(false);
      expect(glob.matches(matching)).toBe(true);
      expect(performance.now() - started).toBeLessThan(100);
    }
  });
});
