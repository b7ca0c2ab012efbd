/** Edit distance (insert, delete, substitute, swap of neighbours) between two short strings. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [
    i,
    ...Array<number>(b.length).fill(0),
  ]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  return d[a.length]![b.length]!;
}

/**
 * The known names closest to `input` (case-insensitive), best first: near misses within a third of the length
 * (at least 2 edits), and names that start with or contain it.
 */
export function closest(input: string, known: readonly string[], max = 3): string[] {
  const needle = input.toLowerCase();
  const limit = Math.max(2, Math.floor(needle.length / 3));
  return known
    .map((name) => {
      const lower = name.toLowerCase();
      const distance = editDistance(needle, lower);
      const contains = needle.length >= 3 && (lower.includes(needle) || needle.includes(lower));
      return { name, score: distance <= limit ? distance : contains ? limit + 1 : Infinity };
    })
    .filter((c) => c.score !== Infinity)
    .sort((x, y) => x.score - y.score || x.name.localeCompare(y.name))
    .slice(0, max)
    .map((c) => c.name);
}

/** ` (did you mean x?)` for a near miss among `known`, or an empty string. */
export function suggestion(input: string, known: readonly string[]): string {
  const near = closest(input, known);
  return near.length > 0 ? ` (did you mean ${near.join(' or ')}?)` : '';
}
