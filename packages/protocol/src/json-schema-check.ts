import { Ajv2020 } from 'ajv/dist/2020.js';
import { z } from 'zod';

/**
 * When a compiled check is made, for a caller that has a fallback for a value the check does not pass: not before it
 * has been asked about `after` units of work (one per call, or what `weight` gives the value). Until then it answers
 * false, "not checked", at no cost, so a short-lived process never pays the compile (tens of ms for a message schema).
 */
export interface CompileDeferral {
  readonly after: number;
  /** The units one value counts for (a request carrying many items costs the fallback more); 1 when absent. */
  readonly weight?: (value: unknown) => number;
}

let checker: Ajv2020 | undefined;
let compiles = 0;

/** How many checks {@link jsonSchemaCheck} has compiled in this process, for tests. */
export function jsonSchemaCompiles(): number {
  return compiles;
}

/**
 * An ajv check of the JSON Schema of one side of a zod schema, compiled on first use, or once `deferral` has run out.
 * A schema JSON Schema cannot express gives a check that always fails.
 */
export function jsonSchemaCheck(
  schema: z.ZodType,
  io: 'input' | 'output',
  deferral?: CompileDeferral,
): (value: unknown) => boolean {
  let check: ((value: unknown) => unknown) | undefined;
  let asked = 0;
  const after = deferral?.after ?? 0;
  const weight = deferral?.weight;
  return (value) => {
    if (check === undefined) {
      asked += weight === undefined ? 1 : weight(value);
      if (asked <= after) return false;
      check = compileCheck(schema, io);
    }
    return check(value) === true;
  };
}

function compileCheck(schema: z.ZodType, io: 'input' | 'output'): (value: unknown) => unknown {
  compiles++;
  try {
    const { $schema: _ignored, ...json } = z.toJSONSchema(schema, {
      target: 'draft-2020-12',
      io,
      unrepresentable: 'throw',
    });
    checker ??= new Ajv2020({
      strict: false,
      logger: false,
      unicode: false,
      validateFormats: false,
      validateSchema: false,
    });
    return checker.compile(json);
  } catch {
    return () => false;
  }
}
