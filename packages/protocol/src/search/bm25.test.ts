import { describe, expect, it } from 'vitest';
import { Bm25Index } from './bm25.js';

describe('Bm25Index', () => {
  const index = new Bm25Index([
    { id: 'hasher', fields: [{ text: 'hasher', weight: 2 }, { text: 'Computes SHA-256 digests of text' }] },
    {
      id: 'calculator',
      fields: [{ text: 'calculator', weight: 2 }, { text: 'Adds and multiplies numbers' }],
    },
    { id: 'git', fields: [{ text: 'git' }, { text: 'Inspects repository history and diffs' }] },
  ]);

  it('ranks the document that shares the rare query terms first', () => {
    const hits = index.search('compute the sha256 digest of "hello"');
    expect(hits[0]?.id).toBe('hasher');
    expect(hits.map((h) => h.id)).not.toContain('git');
  });

  it('matches stems and returns nothing for unrelated or empty queries', () => {
    expect(index.search('multiplying number').map((h) => h.id)).toEqual(['calculator']);
    expect(index.search('weather tomorrow')).toEqual([]);
    expect(index.search('the of a')).toEqual([]);
  });
});
