import { createRequire } from 'node:module';
import type { parse } from 'yaml';

let parser: typeof parse | undefined;

/** Parses a skill's YAML; the parser (about 70 modules) loads with the first skill read, not with the planner. */
export function parseYaml(text: string): unknown {
  parser ??= (createRequire(import.meta.url)('yaml') as { parse: typeof parse }).parse;
  return parser(text);
}
