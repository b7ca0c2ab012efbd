import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { REPO_ROOT } from './helpers/cli.js';

const CHECKER = join(REPO_ROOT, 'scripts', 'check-deps.mjs');
const roots: string[] = [];

/** A throwaway tree with packages/NAME/src files, for the checker's --root. */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'check-deps-'));
  roots.push(root);
  for (const [path, text] of Object.entries(files)) {
    const full = join(root, path);
    mkdirSync(dirname(full), { recursive: true });
    writeFileSync(full, text);
  }
  return root;
}

function check(root: string): { code: number | null; stderr: string } {
  const run = spawnSync(process.execPath, [CHECKER, '--root', root], { encoding: 'utf8' });
  return { code: run.status, stderr: run.stderr };
}

afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

const planner = 'packages/planner/src';

describe('scripts/check-deps.mjs (run by npm run lint)', () => {
  it('passes a tree whose imports go downwards only', () => {
    const root = tree({
      [`${planner}/model/result.ts`]: 'export interface RunResult { status: string }\n',
      [`${planner}/run/executor.ts`]:
        "import type { RunResult } from '../model/result.js';\nexport type R = RunResult;\n",
      [`${planner}/planner.ts`]: "import type { R } from './run/executor.js';\nexport type P = R;\n",
    });
    expect(check(root)).toEqual({ code: 0, stderr: '' });
  });

  it('fails on an import cycle made of type-only imports, and names its files', () => {
    const root = tree({
      'packages/protocol/src/a.ts': "import type { B } from './b.js';\nexport type A = B | 1;\n",
      'packages/protocol/src/b.ts': "import type {\n  A,\n} from './a.js';\nexport type B = A | 2;\n",
    });
    const { code, stderr } = check(root);
    expect(code).toBe(1);
    expect(stderr).toContain('import cycle of 2 files');
    expect(stderr).toContain('in cycle: packages/protocol/src/a.ts');
    expect(stderr).toContain('in cycle: packages/protocol/src/b.ts');
  });

  it('fails when the engine imports a feature, a feature imports another, or a file has no layer', () => {
    const root = tree({
      [`${planner}/agents/children.ts`]: 'export function cancelChildren(): void {}\n',
      [`${planner}/run/loop.ts`]:
        "import { cancelChildren } from '../agents/children.js';\ncancelChildren();\n",
      [`${planner}/hitl/controls.ts`]: "export { parseRecord } from '../durable/lease.js';\n",
      [`${planner}/durable/lease.ts`]: 'export const parseRecord = 1;\n',
      [`${planner}/stray.ts`]: 'export const stray = 1;\n',
    });
    const { code, stderr } = check(root);
    expect(code).toBe(1);
    expect(stderr).toContain(
      `${planner}/run/loop.ts (engine) imports ${planner}/agents/children.ts (feature): a lower layer imports a higher one`,
    );
    expect(stderr).toContain(`${planner}/hitl/controls.ts imports ${planner}/durable/lease.ts: features`);
    expect(stderr).toContain(`${planner}/stray.ts: belongs to no planner layer`);
    expect(stderr).not.toContain('import cycle');
  });

  it('holds for this repository', () => {
    expect(check(REPO_ROOT)).toEqual({ code: 0, stderr: '' });
  });
});
