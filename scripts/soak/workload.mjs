// The chaos soak's workload: five kinds of run in turn (a plain tool run, one waiting on approval, one given an input,
// one with a sub-agent, one of two tool turns), each naming the ledger entries (effects) it must leave, and daemons
// woken by triggers. Every effect is a `ledger.append` entry unique to its run, so an effect made twice shows up in
// the ledger as the same entry twice, whatever call id it had.

const KINDS = ['plain', 'approval', 'input', 'subagent', 'turns'];
const ledger = (id, entry) => ({ id, name: 'ledger.append', arguments: { entry } });
const LIMITS = { timeout_ms: 600_000 };

/** Approvals the driver denies: every fourth approval run. */
export const denies = (i) => i % 20 === 1;

/** The run request of run `i`, and what it must leave behind: its final text and its ledger entries. */
export function chaosRun(prefix, i) {
  const kind = KINDS[i % KINDS.length];
  const id = `${prefix}-${kind}-${i}`;
  const base = {
    id,
    task: `chaos ${kind} ${i}`,
    tools: ['ledger', 'math'],
    tool_search: 'off',
    limits: LIMITS,
  };
  const text = `${kind} ${i} done`;
  switch (kind) {
    case 'approval':
      return {
        kind,
        request: {
          ...base,
          approvals: { require: ['ledger.append'] },
          script: [{ tool_calls: [ledger('a', `a-${i}`)] }, { text }],
        },
        text,
        effects: denies(i) ? [] : [`a-${i}`],
        refused: denies(i) ? [`a-${i}`] : [],
      };
    case 'input':
      return {
        kind,
        request: { ...base, script: [{ delay_ms: 200, tool_calls: [ledger('i', `in-${i}`)] }, { text }] },
        text,
        effects: [`in-${i}`],
        input: `input for ${i}`,
      };
    case 'subagent': {
      const child = { task: `child of ${i}`, tools: ['ledger'] };
      const childScript = [{ tool_calls: [ledger('s', `sub-${i}`)] }, { text: `child ${i}` }];
      return {
        kind,
        request: {
          ...base,
          tools: ['ledger', 'math', 'agent'],
          script: [
            { tool_calls: [{ id: 'ag', name: 'agent__run', arguments: { ...child, script: childScript } }] },
            { text },
          ],
        },
        text,
        effects: [`sub-${i}`],
      };
    }
    case 'turns':
      return {
        kind,
        request: {
          ...base,
          script: [
            { delay_ms: 300, tool_calls: [ledger('t1', `t1-${i}`)] },
            { delay_ms: 300, tool_calls: [ledger('t2', `t2-${i}`), calc('t3', i)] },
            { text },
          ],
        },
        text,
        effects: [`t1-${i}`, `t2-${i}`],
      };
    default:
      return {
        kind,
        request: { ...base, script: [{ tool_calls: [ledger('p', `p-${i}`), calc('c', i)] }, { text }] },
        text,
        effects: [`p-${i}`],
      };
  }
}

function calc(id, i) {
  return { id, name: 'math.calc', arguments: { lhs: i, rhs: 2, op: 'mul' } };
}

/** A daemon that answers each wake with one short turn, for up to `wakes` wakes. */
export function chaosDaemon(prefix, d, wakes) {
  return {
    id: `${prefix}-daemon-${d}`,
    task: `chaos daemon ${d}`,
    tools: ['math'],
    tool_search: 'off',
    daemon: { wake_interval_ms: 0, idle_watchdog: 0, queue_capacity: 1000 },
    limits: { max_iterations: wakes + 10 },
    script: Array.from({ length: wakes + 1 }, (_, k) => ({ text: `wake ${k}` })),
  };
}

/** Executions per ledger entry in the workers' ledger file (`<run_id> <call_id> <entry> <worker>` per line). */
export function ledgerEntries(text) {
  const counts = new Map();
  for (const line of text.split('\n')) {
    const entry = line.split(' ')[2];
    if (entry) counts.set(entry, (counts.get(entry) ?? 0) + 1);
  }
  return counts;
}

/** The p-th percentile of `xs` (nearest rank). */
export function percentile(xs, p) {
  if (xs.length === 0) return 0;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}
