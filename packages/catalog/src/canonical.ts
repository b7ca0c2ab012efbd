import { hash } from 'node:crypto';

/** sha256 (hex) of a spec already written as canonical JSON. */
export function hashCanonical(canonical: string): string {
  return hash('sha256', canonical, 'hex');
}

/** JSON with the keys of every object sorted (UTF-16 order) and undefined members left out: equal values, equal text. */
export function canonicalJson(value: unknown): string {
  if (typeof value !== 'object' || value === null) return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (i > 0) out += ',';
      out +=
        typeof item === 'string' ? JSON.stringify(item) : item === undefined ? 'null' : canonicalJson(item);
    }
    return out + ']';
  }
  const record = value as Record<string, unknown>;
  const keys = sortKeys(Object.keys(record));
  let out = '{';
  for (const key of keys) {
    const v = record[key];
    if (v === undefined) continue;
    if (out.length > 1) out += ',';
    out += quotedKey(key) + ':' + (typeof v === 'string' ? JSON.stringify(v) : canonicalJson(v));
  }
  return out + '}';
}

/**
 * Sorts keys in place, in the order `Array.prototype.sort` gives strings (UTF-16 code units): the few keys of a schema
 * object by insertion, which allocates nothing, where the built-in sort copies every array it sorts.
 */
export function sortKeys(keys: string[]): string[] {
  if (keys.length > 16) return keys.sort();
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i]!;
    let j = i - 1;
    while (j >= 0 && keys[j]! > key) {
      keys[j + 1] = keys[j]!;
      j--;
    }
    keys[j + 1] = key;
  }
  return keys;
}

/** Object keys as JSON strings, remembered: specs repeat the same few dozen keys. */
const quotedKeys = new Map<string, string>();
function quotedKey(key: string): string {
  let quoted = quotedKeys.get(key);
  if (quoted === undefined) {
    quoted = JSON.stringify(key);
    if (quotedKeys.size < 4096) quotedKeys.set(key, quoted);
  }
  return quoted;
}

/** The members {@link specCanonicalJson} writes itself, sorted; a spec with any other member takes the generic path. */
export const SPEC_KEYS = [
  'cpu_bound',
  'description',
  'idempotent',
  'input_schema',
  'loading',
  'name',
  'namespace',
  'output_schema',
  'retry',
  'safety',
  'tags',
  'timeout_ms',
  'version',
] as const;
export const RETRY_KEYS = [
  'backoff_ms',
  'jitter',
  'max_attempts',
  'max_backoff_ms',
  'retry_on',
  'timeout_ms',
] as const;
export const SAFETY_KEYS = [
  'external_spend',
  'filesystem',
  'mutating',
  'needs_confirmation',
  'networked',
  'process',
  'read_only',
] as const;
