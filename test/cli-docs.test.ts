import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT, runAgentmesh } from './helpers/cli.js';

const doc = readFileSync(join(REPO_ROOT, 'docs', 'cli.md'), 'utf8');

function helpBlocks(): Map<string, string> {
  const blocks = new Map<string, string>();
  for (const m of doc.matchAll(/<!-- help:([a-z0-9-]+) -->\n```text\n([\s\S]*?)\n```\n<!-- \/help:\1 -->/g))
    blocks.set(m[1]!, m[2]!);
  return blocks;
}

describe('docs/cli.md', () => {
  it('has the exact --help output of every command, and no section for a command that does not exist', async () => {
    const main = await runAgentmesh(['help']);
    const commands = [...main.stdout.matchAll(/^ {2}([a-z0-9-]+) {2,}/gm)].map((m) => m[1]!);
    expect(commands).toContain('run');
    const blocks = helpBlocks();
    expect([...blocks.keys()].sort(), 'run "npm run docs -w @agentmesh/cli"').toEqual([...commands].sort());
    for (const command of commands) {
      const help = await runAgentmesh([command, '--help']);
      expect(help.code).toBe(0);
      expect(blocks.get(command), `docs/cli.md for ${command}: run "npm run docs -w @agentmesh/cli"`).toBe(
        help.stdout.trimEnd(),
      );
    }
  });

  it('every help lists each flag on one line of its own', async () => {
    for (const [command, block] of helpBlocks()) {
      const flagLines = block.split('\n').filter((l) => /^ {2}(-\w, )?--[a-z]/.test(l));
      const flags = flagLines.map((l) => /--([a-z-]+)/.exec(l)![1]);
      expect(new Set(flags).size, command).toBe(flags.length);
      expect(flags, command).toContain('help');
    }
  });
});

describe('docs/reference', () => {
  const dir = join(REPO_ROOT, 'docs', 'reference');
  it('links only to files that exist in the repository', () => {
    const files = readdirSync(dir).filter((f) => f.endsWith('.md'));
    expect(files.length).toBeGreaterThanOrEqual(5);
    for (const file of files) {
      const text = readFileSync(join(dir, file), 'utf8');
      for (const m of text.matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)) {
        const target = m[1]!;
        if (/^[a-z]+:/.test(target)) continue;
        expect(existsSync(join(dir, target)), `${file} links ${target}`).toBe(true);
      }
      expect(text, file).not.toMatch(/shared\/contract\.md/);
    }
  });

  it('names every JSON Schema file the protocol ships', () => {
    const schemas = readdirSync(join(REPO_ROOT, 'packages', 'protocol', 'schemas')).filter((f) =>
      f.endsWith('.json'),
    );
    const messages = readFileSync(join(dir, 'messages.md'), 'utf8');
    for (const s of schemas) expect(messages, s).toContain(s);
  });
});
