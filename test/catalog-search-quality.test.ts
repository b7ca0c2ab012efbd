import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createToolIndex } from '@agentmesh/catalog';
import type { ToolSpec } from '@agentmesh/protocol';
import { loadCatalogFixture } from './fixtures/catalog/load.js';

const tools: ToolSpec[] = loadCatalogFixture();
const queries = JSON.parse(
  readFileSync(new URL('./fixtures/catalog/queries.json', import.meta.url), 'utf8'),
) as {
  natural: { query: string; expect: string }[];
  regex: { query: string; expect: string[] }[];
};

const index = createToolIndex();
for (const tool of tools) index.add(tool);

describe('catalog search quality on the fixture data set', () => {
  it('the data set is large and varied enough', () => {
    expect(tools.length).toBeGreaterThanOrEqual(500);
    expect(new Set(tools.map((t) => t.namespace)).size).toBeGreaterThanOrEqual(12);
    expect(queries.natural.length).toBeGreaterThanOrEqual(40);
    for (const q of [...queries.natural.map((n) => n.expect), ...queries.regex.flatMap((r) => r.expect)])
      expect(index.has(q), q).toBe(true);
  });

  for (const strategy of ['bm25', 'hybrid'] as const)
    it(`${strategy}: every query finds its tool in the top 3`, () => {
      const misses: string[] = [];
      for (const { query, expect: wanted } of queries.natural) {
        const top = index.search(query, { strategy, limit: 3 }).map((h) => h.name);
        if (!top.includes(wanted)) misses.push(`"${query}" -> [${top.join(', ')}], wanted ${wanted}`);
      }
      expect(misses).toEqual([]);
    });

  it('regex: each pattern finds its tools, names ranked over descriptions', () => {
    const misses: string[] = [];
    for (const { query, expect: wanted } of queries.regex) {
      const top = index
        .search(query, { strategy: 'regex', limit: Math.max(3, wanted.length) })
        .map((h) => h.name);
      for (const w of wanted)
        if (!top.includes(w)) misses.push(`/${query}/ -> [${top.join(', ')}], wanted ${w}`);
    }
    expect(misses).toEqual([]);
  });

  it('a query with no match returns an empty list for every strategy', () => {
    for (const strategy of ['bm25', 'regex', 'hybrid'] as const)
      expect(index.search('zzqxv frobnicate', { strategy })).toEqual([]);
  });

  it('the order is deterministic whatever the insertion order', () => {
    const reversed = createToolIndex();
    for (const tool of [...tools].reverse()) reversed.add(tool);
    for (const strategy of ['bm25', 'hybrid'] as const)
      for (const { query } of queries.natural.slice(0, 15))
        expect(reversed.search(query, { strategy, limit: 20 })).toEqual(
          index.search(query, { strategy, limit: 20 }),
        );
  });
});
