#!/usr/bin/env node
// The readiness check of deploy/try-compose.sh: reads the output of `agentmesh status --json` on stdin and says
// whether the fleet can take a run. Ready means that every role answers service discovery (at least one catalog,
// one planner and --workers N tool workers, default 1) and the catalog answers with at least one tool.
//
//   agentmesh status --json | node deploy/fleet-ready.mjs [--workers N]
//
// Prints "fleet ready: ..." and exits 0, or "fleet not ready: <what is missing>" and exits 1.
// test/fleet-ready.test.ts runs it against the status of a real fleet.

/** The actor kinds of `status --json` (`actors[].kind`) a run needs, with the minimum count of each. */
function required(workers) {
  return { catalog: 1, planner: 1, 'tool-worker': workers };
}

function parseWorkers(argv) {
  const i = argv.indexOf('--workers');
  if (i === -1) return 1;
  const n = Number(argv[i + 1]);
  if (!Number.isInteger(n) || n < 1) {
    process.stderr.write(`fleet-ready: --workers takes a whole number of at least 1, not "${argv[i + 1]}"\n`);
    process.exit(2);
  }
  return n;
}

/** What keeps the fleet of `status` from taking a run: an empty list when it is ready. */
function missing(status, workers = 1) {
  const counts = new Map();
  for (const a of Array.isArray(status?.actors) ? status.actors : [])
    counts.set(a?.kind, (counts.get(a?.kind) ?? 0) + 1);
  const gaps = [];
  for (const [kind, min] of Object.entries(required(workers))) {
    const n = counts.get(kind) ?? 0;
    if (n < min) gaps.push(`${n} of ${min} ${kind} serving`);
  }
  if (typeof status?.tools !== 'number') gaps.push('no catalog answers');
  else if (status.tools === 0) gaps.push('the catalog knows no tool');
  return { gaps, counts };
}

function main() {
  const workers = parseWorkers(process.argv.slice(2));
  let input = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (d) => (input += d));
  process.stdin.on('end', () => {
    let status;
    try {
      status = JSON.parse(input);
    } catch {
      process.stdout.write('fleet not ready: agentmesh status --json printed no JSON (is NATS reachable?)\n');
      process.exit(1);
    }
    const { gaps, counts } = missing(status, workers);
    if (gaps.length > 0) {
      process.stdout.write(`fleet not ready: ${gaps.join('; ')}\n`);
      process.exit(1);
    }
    const roles = Object.keys(required(workers)).map((k) => `${counts.get(k)} ${k}`);
    process.stdout.write(`fleet ready: ${roles.join(', ')}, ${status.tools} tools\n`);
  });
}

main();
