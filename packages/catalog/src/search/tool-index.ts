import { AgentMeshError, ErrorCode, tokenize, type SearchStrategy } from '@agentmesh/protocol';
import { compileSafeRegex } from './safe-regex.js';

/** What the index needs to know of a tool: a ToolSpec fits. */
export interface IndexableTool {
  name: string;
  description: string;
  input_schema?: Record<string, unknown> | undefined;
  tags?: readonly string[] | undefined;
}

export interface ToolSearchHit {
  name: string;
  score: number;
  description: string;
}

export interface ToolSearchOptions {
  strategy?: SearchStrategy;
  /** Most results (default 10, clamped to 1..{@link MAX_SEARCH_LIMIT}). */
  limit?: number;
  /** Only tools this returns true for are ranked (allow-list, loading mode); applied before the limit. */
  filter?: (name: string) => boolean;
}

export interface ToolIndex {
  /** Adds a tool, replacing one of the same name. */
  add(tool: IndexableTool): void;
  /** Removes a tool; returns whether it was there. */
  remove(name: string): boolean;
  has(name: string): boolean;
  readonly size: number;
  /**
   * Ranks tools for a query, best first; ties are broken by name so the order is deterministic. A query with no
   * match returns `[]`; an empty query, or a regex that is unsafe or does not compile, throws `invalid_request`;
   * a regex scan that runs over its time budget throws `timeout`.
   */
  search(query: string, options?: ToolSearchOptions): ToolSearchHit[];
}

export interface ToolIndexOptions {
  /** BM25 term-frequency saturation (default 1.5). */
  k1?: number;
  /** BM25 length normalisation (default 0.75). */
  b?: number;
  /** How many times a name term counts against a description term in BM25 (default 3). */
  nameWeight?: number;
  /** Wall-clock budget of one regex search (default 250 ms). */
  regexBudgetMs?: number;
}

export const DEFAULT_SEARCH_LIMIT = 10;
export const MAX_SEARCH_LIMIT = 50;
/** Longest query accepted, in characters. */
export const MAX_QUERY_LENGTH = 1024;
/** Characters of each tool a regex is run over (name, description, parameter text). */
export const REGEX_SCAN_CHARS = 512;
const RRF_K = 60;
/** Reciprocal-rank fusion looks at this many of each ranking. */
const FUSION_DEPTH = MAX_SEARCH_LIMIT;

/** Clamps a requested result count to 1..max (default limit when absent or not a number). */
export function clampSearchLimit(
  limit: number | undefined,
  max = MAX_SEARCH_LIMIT,
  fallback = DEFAULT_SEARCH_LIMIT,
) {
  const wanted = limit === undefined || !Number.isFinite(limit) ? fallback : Math.trunc(limit);
  return Math.min(Math.max(wanted, 1), Math.max(1, Math.min(max, MAX_SEARCH_LIMIT)));
}

interface Doc {
  id: number;
  name: string;
  description: string;
  /** term -> weighted frequency */
  terms: Map<string, number>;
  length: number;
  nameTerms: string[];
  regexText: string;
  regexName: string;
}

/** Creates an empty, incrementally updated search index over tool specs (BM25, regex, hybrid). */
export function createToolIndex(options: ToolIndexOptions = {}): ToolIndex {
  return new InMemoryToolIndex(options);
}

class InMemoryToolIndex implements ToolIndex {
  private readonly k1: number;
  private readonly b: number;
  private readonly nameWeight: number;
  private readonly regexBudgetMs: number;
  private readonly docs = new Map<number, Doc>();
  private readonly byName = new Map<string, Doc>();
  private readonly postings = new Map<string, Map<number, number>>();
  private readonly namePostings = new Map<string, Set<number>>();
  private sortedNameTerms: string[] | undefined;
  private nextId = 1;
  private totalLength = 0;

  constructor(options: ToolIndexOptions) {
    this.k1 = options.k1 ?? 1.5;
    this.b = options.b ?? 0.75;
    this.nameWeight = options.nameWeight ?? 3;
    this.regexBudgetMs = options.regexBudgetMs ?? 250;
  }

  get size(): number {
    return this.docs.size;
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  add(tool: IndexableTool): void {
    this.remove(tool.name);
    const nameTerms = [...new Set(tokenize(tool.name))];
    const paramText = parameterText(tool.input_schema);
    const terms = new Map<string, number>();
    const count = (list: string[], weight: number) => {
      for (const t of list) terms.set(t, (terms.get(t) ?? 0) + weight);
    };
    count(tokenize(tool.name), this.nameWeight);
    count(tokenize(tool.description), 1);
    count(tokenize(paramText), 1);
    if (tool.tags !== undefined) count(tokenize(tool.tags.join(' ')), 1);
    let length = 0;
    for (const f of terms.values()) length += f;
    const doc: Doc = {
      id: this.nextId++,
      name: tool.name,
      description: tool.description,
      terms,
      length,
      nameTerms,
      regexName: tool.name,
      regexText: `${tool.description}\n${paramText}`.slice(0, REGEX_SCAN_CHARS),
    };
    this.docs.set(doc.id, doc);
    this.byName.set(doc.name, doc);
    this.totalLength += length;
    for (const [term, f] of terms) {
      let list = this.postings.get(term);
      if (list === undefined) this.postings.set(term, (list = new Map()));
      list.set(doc.id, f);
    }
    for (const term of nameTerms) {
      let set = this.namePostings.get(term);
      if (set === undefined) {
        this.namePostings.set(term, (set = new Set()));
        this.sortedNameTerms = undefined;
      }
      set.add(doc.id);
    }
  }

  remove(name: string): boolean {
    const doc = this.byName.get(name);
    if (doc === undefined) return false;
    this.byName.delete(name);
    this.docs.delete(doc.id);
    this.totalLength -= doc.length;
    for (const term of doc.terms.keys()) {
      const list = this.postings.get(term);
      list?.delete(doc.id);
      if (list?.size === 0) this.postings.delete(term);
    }
    for (const term of doc.nameTerms) {
      const set = this.namePostings.get(term);
      set?.delete(doc.id);
      if (set?.size === 0) {
        this.namePostings.delete(term);
        this.sortedNameTerms = undefined;
      }
    }
    return true;
  }

  search(query: string, options: ToolSearchOptions = {}): ToolSearchHit[] {
    const trimmed = query.trim();
    if (trimmed.length === 0)
      throw new AgentMeshError(ErrorCode.InvalidRequest, 'query must not be empty', {
        details: { field: 'query' },
      });
    if (trimmed.length > MAX_QUERY_LENGTH)
      throw new AgentMeshError(
        ErrorCode.InvalidRequest,
        `query is ${trimmed.length} characters long, the limit is ${MAX_QUERY_LENGTH}`,
        { details: { field: 'query' } },
      );
    const limit = clampSearchLimit(options.limit);
    const filter = options.filter ?? (() => true);
    switch (options.strategy ?? 'bm25') {
      case 'bm25':
        return this.toHits(topK(this.bm25(tokenize(trimmed), filter), limit));
      case 'regex':
        return this.toHits(topK(this.regex(trimmed, filter), limit));
      case 'hybrid':
        return this.toHits(this.hybrid(trimmed, filter, limit));
    }
  }

  private toHits(ranked: Scored[]): ToolSearchHit[] {
    return ranked.map(({ doc, score }) => ({
      name: doc.name,
      score: Math.round(score * 1e6) / 1e6,
      description: doc.description,
    }));
  }

  private bm25(queryTerms: string[], filter: (name: string) => boolean): Map<number, Scored> {
    const scores = new Map<number, Scored>();
    const n = this.docs.size;
    if (n === 0) return scores;
    const avgLength = this.totalLength / n;
    for (const term of new Set(queryTerms)) {
      const list = this.postings.get(term);
      if (list === undefined) continue;
      const idf = Math.log(1 + (n - list.size + 0.5) / (list.size + 0.5));
      for (const [id, f] of list) {
        let entry = scores.get(id);
        if (entry === undefined) {
          const doc = this.docs.get(id)!;
          if (!filter(doc.name)) continue;
          scores.set(id, (entry = { doc, score: 0 }));
        }
        const norm = this.k1 * (1 - this.b + (this.b * entry.doc.length) / avgLength);
        entry.score += (idf * f * (this.k1 + 1)) / (f + norm);
      }
    }
    return scores;
  }

  private regex(pattern: string, filter: (name: string) => boolean): Map<number, Scored> {
    const re = compileSafeRegex(pattern);
    const deadline = performance.now() + this.regexBudgetMs;
    const scores = new Map<number, Scored>();
    let scanned = 0;
    for (const doc of this.docs.values()) {
      if (++scanned > 1 && performance.now() > deadline)
        throw new AgentMeshError(
          ErrorCode.Timeout,
          `regex "${pattern.slice(0, 80)}" ran over its ${this.regexBudgetMs} ms budget after ${scanned} of ${this.docs.size} tools; use a simpler pattern`,
          { retryable: false, details: { field: 'query' } },
        );
      if (!filter(doc.name)) continue;
      const inName = re.test(doc.regexName);
      const inText = re.test(doc.regexText);
      if (inName || inText) scores.set(doc.id, { doc, score: (inName ? 2 : 0) + (inText ? 1 : 0) });
    }
    return scores;
  }

  /**
   * Field-weighted match, weighted towards names, over the tools whose name holds a query term and the best BM25
   * matches (`alsoScore`): each query term adds
   * its IDF times 3 when it is a name term, 1.5 when it is a prefix of a name term (or a name term is its prefix, 3+
   * letters), 1 when only the description or parameters hold it; the sum is scaled by the share of query terms
   * matched, so tools that cover the whole query and say it in their name come first.
   */
  private nameMatch(
    queryTerms: string[],
    filter: (name: string) => boolean,
    alsoScore: readonly Scored[],
  ): Map<number, Scored> {
    const scores = new Map<number, Scored>();
    const terms = [...new Set(queryTerms)];
    if (terms.length === 0 || this.docs.size === 0) return scores;
    const n = this.docs.size;
    const related = terms.map((t) => new Set(t.length < 3 ? [] : this.relatedNameTerms(t)));
    const idf = terms.map((t) => {
      const df = this.postings.get(t)?.size ?? 0;
      return Math.log(1 + (n - df + 0.5) / (df + 0.5));
    });
    const candidates = new Set<number>(alsoScore.map((e) => e.doc.id));
    terms.forEach((t, i) => {
      for (const id of this.namePostings.get(t) ?? []) candidates.add(id);
      for (const nameTerm of related[i]!)
        for (const id of this.namePostings.get(nameTerm)!) candidates.add(id);
    });
    for (const id of candidates) {
      const doc = this.docs.get(id)!;
      if (!filter(doc.name)) continue;
      let score = 0;
      let matched = 0;
      for (let i = 0; i < terms.length; i++) {
        const t = terms[i]!;
        let weight = 0;
        if (doc.nameTerms.includes(t)) weight = 3;
        else if (related[i]!.size > 0 && doc.nameTerms.some((nt) => related[i]!.has(nt))) weight = 1.5;
        else if (doc.terms.has(t)) weight = 1;
        if (weight > 0) {
          matched++;
          score += weight * idf[i]!;
        }
      }
      if (score > 0) scores.set(id, { doc, score: (score * matched) / terms.length });
    }
    return scores;
  }

  /** Name terms that start with `term`, or that `term` starts with (3+ letters), other than `term` itself. */
  private relatedNameTerms(term: string): string[] {
    if (this.sortedNameTerms === undefined) this.sortedNameTerms = [...this.namePostings.keys()].sort();
    const sorted = this.sortedNameTerms;
    const related: string[] = [];
    let lo = 0;
    let hi = sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (sorted[mid]! < term) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < sorted.length && sorted[i]!.startsWith(term); i++)
      if (sorted[i] !== term) related.push(sorted[i]!);
    for (let len = 3; len < term.length; len++) {
      const prefix = term.slice(0, len);
      if (this.namePostings.has(prefix)) related.push(prefix);
    }
    return related;
  }

  private hybrid(query: string, filter: (name: string) => boolean, limit: number): Scored[] {
    const terms = tokenize(query);
    const byBm25 = topK(this.bm25(terms, filter), FUSION_DEPTH);
    const byName = topK(this.nameMatch(terms, filter, byBm25), FUSION_DEPTH);
    const fused = new Map<number, Scored>();
    const fuse = (ranking: Scored[]) =>
      ranking.forEach(({ doc }, rank) => {
        const entry = fused.get(doc.id) ?? { doc, score: 0 };
        entry.score += 1 / (RRF_K + rank + 1);
        fused.set(doc.id, entry);
      });
    fuse(byBm25);
    fuse(byName);
    return topK(fused, limit);
  }
}

interface Scored {
  doc: Doc;
  score: number;
}

function better(a: Scored, b: Scored): boolean {
  return a.score > b.score || (a.score === b.score && a.doc.name < b.doc.name);
}

/** The k best entries, best first, ties by name: a bounded insertion pass, cheap for k <= 100. */
function topK(scores: Map<number, Scored>, k: number): Scored[] {
  const top: Scored[] = [];
  for (const entry of scores.values()) {
    if (entry.score <= 0) continue;
    if (top.length === k && !better(entry, top[k - 1]!)) continue;
    let i = top.length === k ? k - 1 : top.length;
    if (top.length < k) top.push(entry);
    while (i > 0 && better(entry, top[i - 1]!)) {
      top[i] = top[i - 1]!;
      i--;
    }
    top[i] = entry;
  }
  return top;
}

/** Parameter names, descriptions and enum values of a JSON Schema, a few levels deep. */
export function parameterText(schema: unknown, depth = 0): string {
  if (schema === null || typeof schema !== 'object' || depth > 3) return '';
  const s = schema as Record<string, unknown>;
  const parts: string[] = [];
  if (depth > 0 && typeof s['description'] === 'string') parts.push(s['description']);
  if (Array.isArray(s['enum'])) for (const v of s['enum']) if (typeof v === 'string') parts.push(v);
  const props = s['properties'];
  if (props !== null && typeof props === 'object')
    for (const [key, value] of Object.entries(props as Record<string, unknown>)) {
      parts.push(key);
      const inner = parameterText(value, depth + 1);
      if (inner !== '') parts.push(inner);
    }
  if (s['items'] !== undefined) {
    const inner = parameterText(s['items'], depth + 1);
    if (inner !== '') parts.push(inner);
  }
  return parts.join(' ');
}
