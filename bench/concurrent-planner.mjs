// The concurrent-runs rounds of planner.bench.mjs in a process of their own, as a planner process runs them: prints
// {"first": ms, "warmed": [ms, ...], "cpuPerRun": [us, ...]} and exits.
import { concurrentRounds } from './embedded-mesh.mjs';

const [count, latency] = process.argv.slice(2).map(Number);
const { first, warmed, cpuPerRun } = await concurrentRounds(count, latency);
process.stdout.write(`${JSON.stringify({ first, warmed, cpuPerRun })}\n`);
