import { createRequire } from 'node:module';
import type { parse } from 'yaml';

let parser: typeof parse | undefined;

/** Parses YAML text; the parser (about 70 modules) loads with the first call, as most commands read no YAML. */
export function parseYaml(text: string): unknown {
  parser ??= (createRequire(import.meta.url)('yaml') as { parse: typeof parse }).parse;
  return parser(text);
}
