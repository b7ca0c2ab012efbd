const STOP_WORDS: ReadonlySet<string> = new Set(
  (
    'a an the of to in on for and or with by from is are be as at it its this that these those into onto me my i ' +
    'you your we our can do does how what which when where who will would should could please via using use'
  ).split(' '),
);

/**
 * Splits text into search terms: on case changes (`readFile` -> read, file), on `_`, `.`, `-` and every other
 * non-alphanumeric character; lowercases, drops stop words and reduces each word to a light stem so that
 * "files", "reading" and "hashed" meet "file", "read" and "hash".
 */
export function tokenize(text: string): string[] {
  const out: string[] = [];
  const spaced = text
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .toLowerCase();
  for (const word of spaced.split(/[^a-z0-9]+/)) {
    if (word.length === 0 || STOP_WORDS.has(word)) continue;
    out.push(stem(word));
  }
  return out;
}

/** A small suffix stemmer, applied the same way to documents and queries. */
export function stem(word: string): string {
  let w = word;
  if (w.length <= 3) return w;
  if (w.endsWith('ies') && w.length > 4) w = w.slice(0, -3) + 'y';
  else if (w.endsWith('sses')) w = w.slice(0, -2);
  else if (w.endsWith('s') && !w.endsWith('ss') && !w.endsWith('us') && !w.endsWith('is')) w = w.slice(0, -1);
  let stripped = false;
  if (w.endsWith('ing') && w.length >= 7) {
    w = w.slice(0, -3);
    stripped = true;
  } else if (w.endsWith('ed') && w.length >= 6) {
    w = w.slice(0, -2);
    stripped = true;
  }
  if (stripped && /([^aeioulsz])\1$/.test(w)) w = w.slice(0, -1);
  if (w.endsWith('e') && w.length >= 5) w = w.slice(0, -1);
  return w;
}
