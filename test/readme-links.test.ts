import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from './helpers/cli.js';

/** The lines of a markdown text outside fenced code blocks, with inline code spans blanked. */
function proseLines(text: string): string[] {
  const lines: string[] = [];
  let fence: string | undefined;
  for (const line of text.split('\n')) {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (marker !== undefined && (fence === undefined || marker.startsWith(fence))) {
      fence = fence === undefined ? marker : undefined;
      continue;
    }
    if (fence === undefined) lines.push(line.replace(/`[^`]*`/g, (code) => ' '.repeat(code.length)));
  }
  return lines;
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, each space a hyphen, repeats numbered. */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const raw = text.split('\n');
  let fence: string | undefined;
  for (const line of raw) {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (marker !== undefined && (fence === undefined || marker.startsWith(fence))) {
      fence = fence === undefined ? marker : undefined;
      continue;
    }
    const heading = fence === undefined ? /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1] : undefined;
    if (heading === undefined) continue;
    const base = heading
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

/** Every relative link of a markdown file whose file, or whose `#anchor` in a markdown file, does not exist. */
function brokenLinks(file: string, text: string): string[] {
  const broken: string[] = [];
  for (const line of proseLines(text))
    for (const m of line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const link = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue;
      const [path, anchor] = link.split('#', 2) as [string, string | undefined];
      const target = path === '' ? file : resolve(dirname(file), decodeURIComponent(path));
      if (path !== '' && !existsSync(target)) {
        broken.push(`${link} (no such file)`);
        continue;
      }
      if (anchor === undefined || !target.endsWith('.md') || (path !== '' && statSync(target).isDirectory()))
        continue;
      const anchors = target === file ? anchorsOf(text) : anchorsOf(readFileSync(target, 'utf8'));
      if (!anchors.has(decodeURIComponent(anchor))) broken.push(`${link} (no heading #${anchor})`);
    }
  return broken;
}

function markdownUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? markdownUnder(join(dir, entry.name))
      : entry.name.endsWith('.md')
        ? [join(dir, entry.name)]
        : [],
  );
}

describe('README and docs links', () => {
  const files = [
    join(REPO_ROOT, 'README.md'),
    join(REPO_ROOT, 'CHANGELOG.md'),
    ...markdownUnder(join(REPO_ROOT, 'docs')),
  ];

  it('every relative link names a file that exists, and every #anchor a heading of that file', () => {
    expect(files.length).toBeGreaterThan(20);
    const broken = files.flatMap((file) =>
      brokenLinks(file, readFileSync(file, 'utf8')).map((b) => `${relative(REPO_ROOT, file)}: ${b}`),
    );
    expect(broken).toEqual([]);
  });

  it('the README stays short enough to read in five minutes (at most 300 lines)', () => {
    const lines = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8').trimEnd().split('\n').length;
    expect(lines).toBeLessThanOrEqual(300);
  });

  it('the README keeps the quick start a new user runs first', () => {
    const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
    expect(readme).toContain(
      'npm ci && npm run build && npx agentmesh run --script examples/add.json "add 2 and 3"',
    );
    expect(readme).toMatch(/^npm test$/m);
    expect(readme).toContain('bash .ci/run');
    expect(readme).toContain('](docs/benchmarks.md)');
    expect(readme).toContain('](docs/tenancy.md)');
  });

  it('the checker finds a missing file, a missing heading, and ignores links inside code', () => {
    const file = join(REPO_ROOT, 'docs', 'example.md');
    const text = [
      '# Example page',
      '## The `console`, again',
      '[ok](cli.md) [ok](#example-page) [ok](#the-console-again) [ok](reference/README.md#agentmesh-reference)',
      '[gone](no-such-page.md) ![gone](nope.png) [bad anchor](cli.md#no-such-heading) [bad here](#nowhere)',
      '`[in code](missing-in-code.md)`',
      '```md',
      '[in a fence](missing-in-fence.md)',
      '## Not a heading',
      '```',
      '[fence heading](#not-a-heading) [web](https://example.com/x.md)',
    ].join('\n');
    expect(brokenLinks(file, text)).toEqual([
      'no-such-page.md (no such file)',
      'nope.png (no such file)',
      'cli.md#no-such-heading (no heading #no-such-heading)',
      '#nowhere (no heading #nowhere)',
      '#not-a-heading (no heading #not-a-heading)',
    ]);
  });
});
