import { tokenize } from './tokenize.js';

/** One document of a {@link Bm25Index}: weighted text fields (a weight of 2 counts each term twice). */
export interface Bm25Document {
  id: string;
  fields: readonly { text: string; weight?: number }[];
}

export interface Bm25Hit {
  id: string;
  score: number;
}

/**
 * A small generic Okapi BM25 scorer over the shared tokenizer, for short document sets (skills, small lists).
 * The catalog's tool index keeps its own tuned variant; both tokenize the same way.
 */
export class Bm25Index {
  private readonly docs: { id: string; terms: Map<string, number>; length: number }[] = [];
  private readonly documentFrequency = new Map<string, number>();
  private readonly k1: number;
  private readonly b: number;

  constructor(documents: readonly Bm25Document[], options: { k1?: number; b?: number } = {}) {
    this.k1 = options.k1 ?? 1.5;
    this.b = options.b ?? 0.75;
    for (const doc of documents) {
      const terms = new Map<string, number>();
      let length = 0;
      for (const field of doc.fields)
        for (const term of tokenize(field.text)) {
          const weight = field.weight ?? 1;
          terms.set(term, (terms.get(term) ?? 0) + weight);
          length += weight;
        }
      for (const term of terms.keys())
        this.documentFrequency.set(term, (this.documentFrequency.get(term) ?? 0) + 1);
      this.docs.push({ id: doc.id, terms, length });
    }
  }

  /** Every document with a positive score for `query`, best first (ties keep document order). */
  search(query: string): Bm25Hit[] {
    const queryTerms = [...new Set(tokenize(query))];
    const n = this.docs.length;
    if (n === 0 || queryTerms.length === 0) return [];
    const avgLength = this.docs.reduce((sum, d) => sum + d.length, 0) / n || 1;
    const hits: Bm25Hit[] = [];
    for (const doc of this.docs) {
      let score = 0;
      for (const term of queryTerms) {
        const f = doc.terms.get(term);
        if (f === undefined) continue;
        const df = this.documentFrequency.get(term) ?? 0;
        const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5));
        const norm = this.k1 * (1 - this.b + (this.b * doc.length) / avgLength);
        score += (idf * f * (this.k1 + 1)) / (f + norm);
      }
      if (score > 0) hits.push({ id: doc.id, score });
    }
    return hits.sort((a, b) => b.score - a.score);
  }
}
