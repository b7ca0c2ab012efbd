// regex.match runs here, on a piscina thread, so that a pattern with catastrophic backtracking is stopped by
// terminating the thread when the call times out or is cancelled.
const MAX_MATCHES = 1000;

export function regexMatch({ pattern, text, flags = '' }) {
  let re;
  try {
    re = new RegExp(pattern, flags.includes('g') ? flags : `${flags}g`);
  } catch (error) {
    throw Object.assign(new Error(`invalid regular expression /${pattern}/${flags}: ${error.message}`), {
      code: 'invalid_arguments',
      retryable: false,
    });
  }
  const matches = [];
  let truncated = false;
  for (const m of text.matchAll(re)) {
    if (matches.length >= MAX_MATCHES) {
      truncated = true;
      break;
    }
    const entry = { match: m[0], index: m.index ?? 0, groups: m.slice(1).map((g) => g ?? null) };
    if (m.groups) entry.named = Object.fromEntries(Object.entries(m.groups).map(([k, v]) => [k, v ?? null]));
    matches.push(entry);
  }
  return { matched: matches.length > 0, count: matches.length, matches, truncated };
}
