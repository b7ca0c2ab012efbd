// The cost of a run's output_schema: checking it at intake, compiling it, and validating a typical final answer (an
// object with a few fields). The new path (compileOutputSchema: limits checked, each schema compiled alone in its own
// ajv, validators cached by canonical text, a step budget on validation) next to the old one, kept here as the
// baseline: one shared ajv compiling every run's schema object (and keeping it, and its $id, for good).
import { Ajv2020 } from 'ajv/dist/2020.js';
import { compileOutputSchema, outputSchemaRefusal } from '@agentmesh/protocol';
import { figure } from './lib.mjs';

export const title =
  'output_schema: intake check, compile and validate per run (new isolated path vs old shared ajv)';

/** The old path, as it was in packages/planner/src/agents/structured-output.ts. */
let sharedAjv;
const oldCompiled = new WeakMap();
function oldValidator(schema) {
  const cached = oldCompiled.get(schema);
  if (cached !== undefined) return cached;
  sharedAjv ??= new Ajv2020({ allErrors: true, strict: false });
  const validate = sharedAjv.compile(schema);
  oldCompiled.set(schema, validate);
  return validate;
}
const oldCheck = (schema, value) => oldValidator(schema)(value);
const newCheck = (schema, value) => compileOutputSchema(schema)(value) === undefined;

/** A typical output_schema, a new object each run (as a run request decodes it); `tag` makes its text distinct. */
function schemaOf(tag) {
  return {
    type: 'object',
    ...(tag === undefined ? {} : { description: `answer ${tag}` }),
    properties: {
      sum: { type: 'number' },
      note: { type: 'string', maxLength: 200 },
      tags: { type: 'array', items: { type: 'string' } },
      status: { enum: ['ok', 'partial', 'failed'] },
    },
    required: ['sum', 'note', 'status'],
    additionalProperties: false,
  };
}
const answer = { sum: 5, note: 'added 2 and 3', tags: ['math'], status: 'ok' };

/** us per call of `fn(i)`, best of 3 rounds of `n` calls. */
function usPerCall(fn, n) {
  let best = Infinity;
  let offset = 0;
  for (let round = 0; round < 3; round++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < n; i++) if (fn(offset + i) !== true) throw new Error('the answer did not validate');
    best = Math.min(best, Number(process.hrtime.bigint() - start) / n / 1000);
    offset += n;
  }
  return best;
}

export async function run({ quick }) {
  const runs = quick ? 300 : 2_000;
  const figures = [];
  // every run brings a schema never seen before: the old path compiles it, the new one too (cache miss)
  const oldMiss = { name: 'old: shared ajv, compile + validate, new schema', value: 0 };
  oldMiss.value = usPerCall((i) => oldCheck(schemaOf(`old ${i}`), answer), runs);
  figures.push(figure(oldMiss.name, oldMiss.value, 'us'));
  figures.push(
    figure(
      'new: check + isolated compile + validate, new schema',
      usPerCall((i) => newCheck(schemaOf(`new ${i}`), answer), runs),
      'us',
      oldMiss,
    ),
  );
  // every run brings the same schema text in a new object (an application sending its schema each time)
  const oldSame = { name: 'old: shared ajv, compile + validate, same schema', value: 0 };
  oldSame.value = usPerCall(() => oldCheck(schemaOf(), answer), runs);
  figures.push(figure(oldSame.name, oldSame.value, 'us'));
  figures.push(
    figure(
      'new: check + cached validator + validate, same schema',
      usPerCall(() => newCheck(schemaOf(), answer), runs * 10),
      'us',
      oldSame,
    ),
  );
  // the intake check alone (RunRequest and agent.run arguments), and one validation of a compiled schema
  figures.push(
    figure(
      'new: intake check of output_schema',
      usPerCall(() => outputSchemaRefusal(schemaOf()) === undefined, runs * 10),
      'us',
    ),
  );
  const schema = schemaOf();
  const oldValidate = oldValidator(schema);
  const newValidate = compileOutputSchema(schema);
  const oldOnly = { name: 'old: validate only', value: 0 };
  oldOnly.value = usPerCall(() => oldValidate(answer), runs * 100) * 1000;
  figures.push(figure(oldOnly.name, oldOnly.value, 'ns'));
  figures.push(
    figure(
      'new: validate only (step budget metered)',
      usPerCall(() => newValidate(answer) === undefined, runs * 100) * 1000,
      'ns',
      oldOnly,
    ),
  );
  return figures;
}
