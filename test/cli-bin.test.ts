import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { REPO_ROOT } from './helpers/cli.js';

/**
 * bin/agentmesh.js chooses what to run: the bundle `npm run build` made while no project was built again since, else
 * the built modules. Checked on a copy of the bin beside stand-in builds that print which one ran.
 */
const root = mkdtempSync(join(tmpdir(), 'agentmesh-bin-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let pkg = '';
let cases = 0;

function layOut(): void {
  pkg = join(root, `case-${++cases}`);
  mkdirSync(join(pkg, 'dist', 'bundle'), { recursive: true });
  cpSync(join(REPO_ROOT, 'packages', 'cli', 'bin'), join(pkg, 'bin'), { recursive: true });
  writeFileSync(join(pkg, 'package.json'), '{"type":"module"}\n');
  writeFileSync(join(pkg, 'dist', 'main.js'), "process.stdout.write('modules');\n");
  writeFileSync(join(pkg, 'dist', 'bundle', 'main.js'), "process.stdout.write('bundle');\n");
  writeFileSync(join(pkg, 'dist', '.tsbuildinfo'), '{}');
  stamp();
}

/** Writes the bundle's stamp from the build info as it is now. */
function stamp(): void {
  const builds = { '../.tsbuildinfo': statSync(join(pkg, 'dist', '.tsbuildinfo')).mtimeMs };
  writeFileSync(join(pkg, 'dist', 'bundle', 'stamp.json'), JSON.stringify({ builds }));
}

function ran(env: Record<string, string> = {}): { out: string; err: string; code: number | null } {
  const r = spawnSync(process.execPath, [join(pkg, 'bin', 'agentmesh.js')], {
    encoding: 'utf8',
    env: { ...process.env, AGENTMESH_NO_BUNDLE: '', ...env },
  });
  return { out: r.stdout, err: r.stderr, code: r.status };
}

describe('bin/agentmesh.js', () => {
  beforeEach(layOut);

  it('runs the bundle made from the current build', () => {
    expect(ran().out).toBe('bundle');
  });

  it('runs the built modules once a project was built again after the bundle (a `tsc -b` alone)', () => {
    const later = new Date(Date.now() + 5_000);
    utimesSync(join(pkg, 'dist', '.tsbuildinfo'), later, later);
    expect(ran().out).toBe('modules');
    stamp();
    expect(ran().out).toBe('bundle');
  });

  it('runs the bundle where the build info was left out (a runtime image copies dist/ without it)', () => {
    rmSync(join(pkg, 'dist', '.tsbuildinfo'));
    expect(ran().out).toBe('bundle');
  });

  it('runs the built modules when the bundle has no stamp, an unreadable stamp or no main file', () => {
    writeFileSync(join(pkg, 'dist', 'bundle', 'stamp.json'), '{"builds":');
    expect(ran().out).toBe('modules');
    rmSync(join(pkg, 'dist', 'bundle', 'stamp.json'));
    expect(ran().out).toBe('modules');
    stamp();
    rmSync(join(pkg, 'dist', 'bundle', 'main.js'));
    expect(ran().out).toBe('modules');
  });

  it('AGENTMESH_NO_BUNDLE=1 runs the built modules', () => {
    expect(ran({ AGENTMESH_NO_BUNDLE: '1' }).out).toBe('modules');
  });

  it('says to build first when nothing is built', () => {
    rmSync(join(pkg, 'dist'), { recursive: true });
    const r = ran();
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/not built yet: run "npm run build"/);
  });
});
