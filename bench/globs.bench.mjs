// Glob matching on the hot path: tool-name patterns (a run's tools/deferred/always, checked for every tool a
// catalog lists and a planner exposes) and workspace globs (search include/exclude, the denylist, checked for every
// file a walk meets). The linear-time matchers next to the RegExp-building code they replaced (kept below as the
// baseline), on typical patterns; and the time a backtracking pattern takes now (the old code did not finish).
import { matchesToolPattern } from '@agentmesh/protocol';
import { compileGlob } from '@agentmesh/tool-worker';
import { figure } from './lib.mjs';

export const title = 'Globs: linear-time matching vs the old RegExp, typical patterns (ns per match)';

const TOOL_NAMES = [
  'math.calc',
  'crypto.sha256',
  'crypto.hmac',
  'fs.read_file',
  'fs.write_file',
  'fs.search_files',
  'fs.list_dir',
  'git.status',
  'git.diff',
  'shell.run',
  'http.fetch',
  'text.count_words',
  'agent.spawn',
  'tool_search',
  'mcp.github.create_issue',
  'mcp.github.list_pulls',
];

const PATHS = [
  'README.md',
  'package.json',
  'src/index.ts',
  'src/run/executor.ts',
  'src/run/executor.test.ts',
  'packages/protocol/src/names.ts',
  'packages/tool-worker/src/packs/workspace/glob.ts',
  'docs/tool-calls.md',
  'test/fixtures/catalog/tools.json',
  '.env.local',
  'node_modules/zod/lib/index.js',
  'dist/index.d.ts',
];

/** The old tool-name matcher: a RegExp per glob, `*` as `[^.]*` and `**` as `.*` (backtracks without bound). */
const oldToolCache = new Map();
function oldMatchesToolPattern(name, pattern) {
  if (pattern === name || pattern === '*' || pattern === '**') return true;
  if (!pattern.includes('*')) return name.startsWith(pattern + '.');
  let re = oldToolCache.get(pattern);
  if (re === undefined) {
    const source = pattern
      .split(/(\*\*|\*)/)
      .map((part) =>
        part === '**' ? '.*' : part === '*' ? '[^.]*' : part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'),
      )
      .join('');
    re = new RegExp(`^${source}$`);
    oldToolCache.set(pattern, re);
  }
  return re.test(name);
}

/** The old workspace glob: the same dialect compiled to one RegExp (backtracks without bound). */
function oldCompileGlob(pattern, options = {}) {
  const basenameOnly = !pattern.includes('/');
  const regex = new RegExp(
    `^${oldGlobSource(pattern.replace(/^\.\//, ''))}$`,
    options.caseInsensitive ? 'i' : '',
  );
  return {
    matches: (path) => regex.test(basenameOnly ? path.slice(path.lastIndexOf('/') + 1) : path),
  };
}

function oldGlobSource(glob) {
  let out = '';
  let braceDepth = 0;
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i];
    if (ch === '*') {
      if (glob[i + 1] === '*') {
        const slashAfter = glob[i + 2] === '/';
        out += slashAfter ? '(?:.*/)?' : '.*';
        i += slashAfter ? 2 : 1;
      } else {
        out += '[^/]*';
      }
    } else if (ch === '?') {
      out += '[^/]';
    } else if (ch === '{') {
      braceDepth++;
      out += '(?:';
    } else if (ch === '}' && braceDepth > 0) {
      braceDepth--;
      out += ')';
    } else if (ch === ',' && braceDepth > 0) {
      out += '|';
    } else if (ch === '[') {
      const close = glob.indexOf(']', i + 2);
      if (close === -1) {
        out += '\\[';
      } else {
        let body = glob.slice(i + 1, close).replace(/\\/g, '\\\\');
        if (body.startsWith('!')) body = `^${body.slice(1)}`;
        out += `[${body}]`;
        i = close;
      }
    } else {
      out += ch.replace(/[.+^$()|\\\]{}]/g, '\\$&');
    }
  }
  return out;
}

/** ns per call of `fn(item)` over `items`, best of 5 rounds of `n` calls. */
function nsPerCall(fn, items, n) {
  let best = Infinity;
  let sink = 0;
  for (let round = 0; round < 5; round++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < n; i++) sink += fn(items[i % items.length]) ? 1 : 0;
    best = Math.min(best, Number(process.hrtime.bigint() - start) / n);
  }
  if (sink === -1) console.log(sink);
  return best;
}

export async function run({ quick }) {
  const n = quick ? 200_000 : 1_000_000;
  const figures = [];
  for (const pattern of ['fs.*', 'math.**', 'crypto.sha*', '*.read_*', 'mcp.**.list_*']) {
    const old = nsPerCall((name) => oldMatchesToolPattern(name, pattern), TOOL_NAMES, n);
    const now = nsPerCall((name) => matchesToolPattern(name, pattern), TOOL_NAMES, n);
    const base = { name: `tool pattern "${pattern}", old RegExp`, value: old };
    figures.push(figure(base.name, old, 'ns'), figure(`tool pattern "${pattern}", linear`, now, 'ns', base));
  }
  for (const [pattern, options] of [
    ['**/*.ts', {}],
    ['src/**/*.test.ts', {}],
    ['*.{ts,md,json}', {}],
    ['.env*', { caseInsensitive: true }],
  ]) {
    const old = oldCompileGlob(pattern, options);
    const now = compileGlob(pattern, options);
    const label = `workspace glob "${pattern}"${options.caseInsensitive ? ' (i)' : ''}`;
    const base = { name: `${label}, old RegExp`, value: nsPerCall((p) => old.matches(p), PATHS, n / 2) };
    figures.push(
      figure(base.name, base.value, 'ns'),
      figure(
        `${label}, linear`,
        nsPerCall((p) => now.matches(p), PATHS, n / 2),
        'ns',
        base,
      ),
    );
  }
  const name27 = 'a'.repeat(13) + '.' + 'a'.repeat(13);
  const hostile = [
    [
      'tool pattern 24 "*" then "z", 27-character name (old RegExp: did not finish in 60 s)',
      '*'.repeat(24) + 'z',
      name27,
    ],
    ['tool pattern 40 "*" then "z", 27-character name', '*'.repeat(40) + 'z', name27],
    ['tool pattern "a*" 60 times then "b", 63 "a" then "b"', 'a*'.repeat(60) + 'b', 'a'.repeat(63) + 'b'],
    ['tool pattern "**.*" 20 times then "z", 19 dots', '**.*'.repeat(20) + 'z', 'a.'.repeat(19) + 'az'],
  ];
  for (const [label, pattern, name] of hostile)
    figures.push(
      figure(
        `${label}, linear`,
        nsPerCall((n) => matchesToolPattern(n, pattern), [name], quick ? 2_000 : 10_000),
        'ns',
      ),
    );
  for (const [label, pattern, path] of [
    [
      'workspace glob {a,{a,...}} 40 deep then "*a" 40 times, 300 "a"',
      '{a,'.repeat(40) + 'a' + '}'.repeat(40) + '*a'.repeat(40) + '!',
      'a'.repeat(300),
    ],
    [
      'workspace glob "**/" 40 times then "z", 60 folders deep',
      '**/'.repeat(40) + 'z',
      'a/'.repeat(60) + 'y',
    ],
    ['workspace glob "{a,a}" 40 times then "b", 60 "a"', '{a,a}'.repeat(40) + 'b', 'a'.repeat(60)],
  ]) {
    const glob = compileGlob(pattern);
    figures.push(
      figure(
        `${label}, linear`,
        nsPerCall((p) => glob.matches(p), [path], quick ? 200 : 1_000),
        'ns',
      ),
    );
  }
  return figures;
}
