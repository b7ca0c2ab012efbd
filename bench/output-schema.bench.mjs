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

/** us per call of `fn(i)` for each of `fns`, best of 5 rounds of `n` calls, the rounds of all `fns` interleaved. */
function usPerCall(fns, n) {
  const best = fns.map(() => Infinity);
  let offset = 0;
  for (let round = 0; round < 5; round++) {
    fns.forEach((fn, k) => {
      const start = process.hrtime.bigint();
      for (let i = 0; i < n; i++) if (fn(offset + i) !== true) throw new Error('the answer did not validate');
      best[k] = Math.min(best[k], Number(process.hrtime.bigint() - start) / n / 1000);
    });
    offset += n;
  }
  return best;
}

/** The figures of one old-vs-new pair measured interleaved, the old one the baseline. */
function pair(oldName, newName, unit, [oldValue, newValue]) {
  const base = { name: oldName, value: oldValue };
  return [figure(oldName, oldValue, unit), figure(newName, newValue, unit, base)];
}

export async function run({ quick }) {
  const runs = quick ? 200 : 1_000;
  const schema = schemaOf();
  const oldValidate = oldValidator(schema);
  const newValidate = compileOutputSchema(schema);
  const intake = usPerCall([() => outputSchemaRefusal(schemaOf()) === undefined], runs * 10)[0];
  return [
    // every run brings a schema never seen before: both paths compile it (the new one misses its cache)
    ...pair(
      'old: shared ajv, compile + validate, new schema',
      'new: check + isolated compile + validate, new schema',
      'us',
      usPerCall(
        [(i) => oldCheck(schemaOf(`old ${i}`), answer), (i) => newCheck(schemaOf(`new ${i}`), answer)],
        runs,
      ),
    ),
    // every run brings the same schema text in a new object (an application sending its schema each time)
    ...pair(
      'old: shared ajv, compile + validate, same schema',
      'new: check + cached validator + validate, same schema',
      'us',
      usPerCall([() => oldCheck(schemaOf(), answer), () => newCheck(schemaOf(), answer)], runs),
    ),
    // the intake check alone (RunRequest and agent.run arguments), and one validation of a compiled schema
    figure('new: intake check of output_schema', intake, 'us'),
    ...pair(
      'old: validate only',
      'new: validate only (step budget metered)',
      'ns',
      usPerCall([() => oldValidate(answer), () => newValidate(answer) === undefined], runs * 100).map(
        (us) => us * 1000,
      ),
    ),
  ];
}
