// The cost of output guardrails on a streamed turn: every delta goes through the StreamRedactor (held back by the
// longest match a rule can make, scanned from the point released so far). A turn of ~10,000 characters in 4-character
// deltas under three rules (one unbounded, so 256 characters are held), against the same stream with no rule.
import { GuardrailsSchema } from '@agentmesh/protocol';
import { StreamRedactor, compileGuardrails } from '@agentmesh/planner';
import { figure } from './lib.mjs';

export const title = 'guardrails: output rules on a streamed turn (per delta, per turn)';

const rules = compileGuardrails(
  GuardrailsSchema.parse({
    output: [
      { name: 'no-secrets', pattern: 'SECRET_[0-9]+', action: 'redact' },
      { name: 'pin', pattern: 'PIN-\\d{4}', action: 'redact' },
      { name: 'bomb', pattern: 'how to build a bomb', flags: 'i', action: 'block' },
    ],
  }),
).output;
const text = 'lorem ipsum dolor sit amet SECRET_1234 consectetur PIN-9876 adipiscing elit '.repeat(130);
const deltas = text.match(/.{1,4}/gs);

function streamTurn(set) {
  const redactor = new StreamRedactor(set);
  let out = '';
  for (const d of deltas) out += redactor.push(d).text;
  return out + redactor.end().text;
}

/** ms per turn, best of `rounds` rounds of `n` turns. */
function msPerTurn(set, n, rounds) {
  let best = Infinity;
  for (let r = 0; r < rounds; r++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < n; i++) streamTurn(set);
    best = Math.min(best, Number(process.hrtime.bigint() - start) / n / 1e6);
  }
  return best;
}

export async function run({ quick }) {
  if (streamTurn(rules).includes('SECRET_1')) throw new Error('the secret was not redacted');
  const n = quick ? 5 : 20;
  const none = msPerTurn([], n, 5);
  const three = msPerTurn(rules, n, 5);
  const base = { name: 'no rule: ms per turn', value: none };
  return [
    figure(base.name, none, 'ms'),
    figure('3 output rules: ms per turn', three, 'ms', base),
    figure('3 output rules: us per delta', (three * 1000) / deltas.length, 'us'),
    figure('turn: characters / deltas', text.length / deltas.length, 'chars'),
  ];
}
