import { describe, expect, it } from 'vitest';
import { checkModeFlags, parseCommandArgs, usageOf } from './args.js';
import { COMMANDS } from './cli.js';
import { closest } from './suggest.js';
import { resolveToolEntries } from './tools.js';

const run = COMMANDS.find((c) => c.spec.name === 'run')!.spec;

describe('flag handling', () => {
  it('suggests the nearest flag for a near miss and prints the usage line, not parseArgs text', () => {
    expect(() => parseCommandArgs(run, ['--tols', 'math', 'x'])).toThrow(
      /unknown flag --tols \(did you mean --tools\?\)\nusage: agentmesh run/,
    );
    expect(() => parseCommandArgs(run, ['--max-iteration', '3', 'x'])).toThrow(
      /did you mean --max-iterations/,
    );
    expect(() => parseCommandArgs(run, ['--nats'])).toThrow(/--nats needs a value/);
    try {
      parseCommandArgs(run, ['--bogus']);
    } catch (error) {
      expect((error as Error).message).not.toMatch(/To specify a positional argument/);
    }
  });

  it('keeps "-" as the task (read from stdin)', () => {
    expect(parseCommandArgs(run, ['-']).positionals).toEqual(['-']);
  });

  it('lists every flag of every command on one line each', () => {
    for (const { spec } of COMMANDS) {
      const help = usageOf(spec);
      for (const name of Object.keys(spec.flags)) {
        const lines = help.split('\n').filter((l) => l.includes(`--${name} `) || l.endsWith(`--${name}`));
        expect(lines.length, `${spec.name} --${name}`).toBeGreaterThanOrEqual(1);
      }
    }
  });

  it('refuses flags that do not apply to the mode and says where they belong', () => {
    const args = parseCommandArgs(run, ['--workspace', '.', 'x']);
    expect(() => checkModeFlags(run, args, 'nats')).toThrow(
      /--workspace does not apply to a run on NATS.*agentmesh worker --workspace/,
    );
    expect(() => checkModeFlags(run, args, 'embedded')).not.toThrow();
  });

  it('suggests close names', () => {
    expect(closest('rnu', ['run', 'runs', 'status'])).toEqual(['run', 'runs']);
    expect(closest('Math.Calc', ['math.calc', 'crypto.sha256'])).toEqual(['math.calc']);
    expect(closest('zzzzzz', ['run'])).toEqual([]);
  });
});

describe('--tools entries', () => {
  const known = {
    tools: ['math.calc', 'crypto.sha256', 'fs.read_file'],
    packs: { builtin: ['math.calc', 'crypto.sha256'], workspace: ['fs.read_file'] },
  };
  it('accepts packs, canonical names, namespaces and globs', () => {
    expect(resolveToolEntries(['builtin'], known)).toEqual(['math.calc', 'crypto.sha256']);
    expect(resolveToolEntries(['fs', 'crypto.*', 'math.calc'], known)).toEqual([
      'fs.read_file',
      'crypto.sha256',
      'math.calc',
    ]);
  });
  it('refuses an entry that matches nothing, naming it with the closest names', () => {
    expect(() => resolveToolEntries(['Math.Calc'], known)).toThrow(
      /"Math\.Calc" matches no tool \(did you mean math\.calc/,
    );
    expect(() => resolveToolEntries(['math.calc', 'nosuch.tool'], known)).toThrow(
      /"nosuch\.tool" matches no tool/,
    );
    expect(() =>
      resolveToolEntries(['workspace'], { ...known, packs: { ...known.packs, workspace: [] } }),
    ).toThrow(/--workspace DIR/);
  });
});
