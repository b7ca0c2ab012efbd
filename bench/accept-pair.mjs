// A paired A/B of submit -> run.accepted (not part of `npm run bench`; a diagnostic): two planners in one process, a
// baseline build's and this tree's, each with its own connections and prefix; blocks of submits alternate between
// them, so both meet the same load on a shared machine (separate runs of the probe differ more than the change).
//   node bench/accept-pair.mjs NATS_URL BASE_DIR [blocks] [size]
// BASE_DIR is a built copy of the baseline tree (e.g. `cp -al` of a worktree before the change). Prints the medians of
// the blocks' p50 and CPU (until run.accepted is heard, and for the whole submit and 1-turn run) and the median of the
// paired ratios (this tree / baseline).
import { acceptRig } from './accept-rig.mjs';

const [natsUrl, baseDir, b = '16', z = '25'] = process.argv.slice(2);
const variants = [];
for (const [name, root] of [
  ['base', baseDir],
  ['branch', new URL('..', import.meta.url).pathname],
]) {
  const protocol = await import(`${root}/packages/protocol/dist/index.js`);
  const planner = await import(`${root}/packages/planner/dist/index.js`);
  const prefix = `pair${name}${process.pid}`;
  const rig = await acceptRig(natsUrl, prefix, `pair-${name}`, { protocol, planner });
  let n = 0;
  const timed = async () => {
    const c0 = process.cpuUsage();
    let cpu = 0;
    const us = await rig.submitOne(`${name}-${++n}`, () => {
      const u = process.cpuUsage(c0);
      cpu = u.user + u.system;
    });
    const all = process.cpuUsage(c0);
    return { us, cpu, cpuAll: all.user + all.system };
  };
  variants.push({ name, timed, rig });
}
const med = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
for (const v of variants) for (let i = 0; i < 60; i++) await v.timed();
const blocks = Number(b);
const size = Number(z);
const res = variants.map(() => []);
for (let k = 0; k < blocks; k++) {
  const order = k % 2 === 0 ? [0, 1] : [1, 0];
  for (const i of order) {
    const runs = [];
    for (let j = 0; j < size; j++) runs.push(await variants[i].timed());
    res[i].push({
      p50: med(runs.map((r) => r.us)),
      cpu: med(runs.map((r) => r.cpu)),
      all: med(runs.map((r) => r.cpuAll)),
    });
  }
}
const ratios = res[1].map((r, k) => r.p50 / res[0][k].p50);
const cpuRatios = res[1].map((r, k) => r.cpu / res[0][k].cpu);
console.log(
  JSON.stringify({
    base_p50: Math.round(med(res[0].map((r) => r.p50))),
    branch_p50: Math.round(med(res[1].map((r) => r.p50))),
    p50_ratio: +med(ratios).toFixed(3),
    base_cpu_to_accepted: Math.round(med(res[0].map((r) => r.cpu))),
    branch_cpu_to_accepted: Math.round(med(res[1].map((r) => r.cpu))),
    cpu_ratio: +med(cpuRatios).toFixed(3),
    base_cpu_submit_run: Math.round(med(res[0].map((r) => r.all))),
    branch_cpu_submit_run: Math.round(med(res[1].map((r) => r.all))),
  }),
);
for (const v of variants) await v.rig.stop();
