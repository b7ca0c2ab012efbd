import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, cleanEnv } from './helpers/cli.js';

const ADD_SCRIPT = join(REPO_ROOT, 'examples', 'add.json');
const temps: string[] = [];
const temp = (name: string) => {
  const dir = mkdtempSync(join(tmpdir(), `agentmesh-${name}-`));
  temps.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

function npm(args: string[], cwd = REPO_ROOT) {
  const r = spawnSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd,
    encoding: 'utf8',
    timeout: 240_000,
  });
  expect(r.status, `npm ${args.join(' ')}\n${r.stdout}\n${r.stderr}`).toBe(0);
  return r;
}

/** Runs the installed `agentmesh` from a folder that is not the repository. */
function agentmeshFrom(prefix: string, args: string[], extraEnv: Record<string, string> = {}) {
  const cwd = temp('elsewhere');
  return spawnSync(join(prefix, 'bin', 'agentmesh'), args, {
    cwd,
    encoding: 'utf8',
    env: { ...cleanEnv(extraEnv), PATH: `${join(prefix, 'bin')}:${process.env['PATH']}` },
    timeout: 60_000,
  });
}

function expectWorks(prefix: string) {
  const version = agentmeshFrom(prefix, ['--version']);
  expect(version.status, version.stderr).toBe(0);
  expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  const run = agentmeshFrom(prefix, ['run', '--script', ADD_SCRIPT, 'add 2 and 3']);
  expect(run.status, run.stderr).toBe(0);
  expect(run.stdout).toMatch(/2 \+ 3 = 5/);
}

describe('agentmesh on the PATH, outside the repository', () => {
  it('npm install -g ./packages/cli (a link to the built clone)', () => {
    const prefix = temp('prefix-link');
    npm(['install', '-g', '--prefix', prefix, join(REPO_ROOT, 'packages', 'cli')]);
    expectWorks(prefix);
  }, 300_000);

  it('npm install -g of the packed workspace tarballs', () => {
    const packs = temp('packs');
    npm(['pack', '--workspaces', '--pack-destination', packs]);
    const tarballs = readdirSync(packs).filter((f) => f.endsWith('.tgz'));
    expect(tarballs.sort()).toEqual(
      ['catalog', 'cli', 'planner', 'protocol', 'tool-worker'].map((p) => `agentmesh-${p}-0.1.0.tgz`),
    );
    const prefix = temp('prefix-packed');
    npm(['install', '-g', '--prefix', prefix, '--prefer-offline', ...tarballs.map((t) => join(packs, t))]);
    expectWorks(prefix);
    // the tarballs leave out tsc's build info, so the installed command runs its bundle
    const log = join(temp('modules'), 'modules.txt');
    const recorder = join(REPO_ROOT, 'test', 'fixtures', 'record-modules.mjs');
    const version = agentmeshFrom(prefix, ['--version'], {
      NODE_OPTIONS: `--import=${recorder}`,
      AGENTMESH_MODULE_LOG: log,
    });
    expect(version.status, version.stderr).toBe(0);
    expect(readFileSync(log, 'utf8')).toMatch(/@agentmesh\/cli\/dist\/bundle\/main\.js$/m);
  }, 300_000);
});

describe('npm ci at the root', () => {
  it('installs nothing that needs a newer Node than the project supports (bench peers live in bench/)', () => {
    const lock = JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { engines?: { node?: string } | string[] }>;
    };
    const tooNew = Object.entries(lock.packages)
      .filter(([, p]) => {
        const range = !Array.isArray(p.engines) ? p.engines?.node : undefined;
        const major = range ? /(\d+)/.exec(range)?.[1] : undefined;
        return major !== undefined && Number(major) > 20 && !/\|\|/.test(range!);
      })
      .map(([name, p]) => `${name} ${JSON.stringify(p.engines)}`);
    expect(tooNew).toEqual([]);
    const root = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as {
      devDependencies: Record<string, string>;
    };
    for (const peer of ['@openai/agents-core', '@langchain/core', 'moleculer', 'nats'])
      expect(Object.keys(root.devDependencies)).not.toContain(peer);
  });
});
