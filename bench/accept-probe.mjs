// A probe of submit -> run.accepted, the same steps as planner.bench.mjs submitToAccepted (not part of `npm run bench`;
// a diagnostic for where the time goes). Against a running nats-server with JetStream:
//   node bench/accept-probe.mjs NATS_URL ab [blocks] [size]  blocks of ours alternated with both bare floors: p50s,
//                                                             paired ratios, CPU per submit
//   node bench/accept-probe.mjs NATS_URL run [n]             n submits: p50, CPU per submit, CPU until run.accepted
//                                                             is heard (PROBE_WINDOWS=file writes each submit's
//                                                             window, to cut a --cpu-prof profile to them)
//   node bench/accept-probe.mjs NATS_URL stages [n]          every message in and out of the three connections and
//   node bench/accept-probe.mjs NATS_URL floorstages [n]     every socket write, median time from the submit (ours,
//                                                             or the bare floor's)
// `stages` only observes: it wraps nats-core's ProtocolHandler publish/processMsg and the transport's send to take a
// timestamp, then calls them unchanged. PROBE_PAUSE=ms waits that long after each run's end before the next submit.
// `stages` (ours) also prints the spans of each submit on the planner's path (p25/p50): delivery -> the record
// create's socket write -> its answer -> the `run.accepted` append's write -> heard; PROBE_SPANS=file writes them
// (process.hrtime in us, the clock of a --cpu-prof profile) to cut a profile to one span.
import { performance } from 'node:perf_hooks';
import { bareAcceptChain } from './accept-floor.mjs';
import { acceptRig } from './accept-rig.mjs';
import { alternated, median, pairedRatio } from './lib.mjs';

const [natsUrl, mode = 'ab', a1, a2] = process.argv.slice(2);
const prefix = `probe${process.pid}`;
const rig = await acceptRig(natsUrl, prefix, 'probe');
const { bus, clientBus, nc } = rig;
const payload = JSON.stringify({ task: 'bench', script: [{ text: 'ok' }] });
let n = 0;
let cpuToAccepted = [];
const windows = [];
const timed = async () => {
  const c0 = process.cpuUsage();
  const h0 = process.hrtime.bigint();
  const us = await rig.submitOne(`acc-${++n}`, () => {
    const u = process.cpuUsage(c0);
    cpuToAccepted.push(u.user + u.system);
    windows.push([Number(h0 / 1000n), Number(process.hrtime.bigint() / 1000n)]);
  });
  if (process.env.PROBE_PAUSE) await new Promise((r) => setTimeout(r, Number(process.env.PROBE_PAUSE)));
  return us;
};
const block = async (size) => {
  const out = [];
  for (let i = 0; i < size; i++) out.push(await timed());
  return out.sort((x, y) => x - y)[Math.floor(size / 2)];
};
const withCpu = async (count, f) => {
  const before = process.cpuUsage();
  const r = await f();
  const used = process.cpuUsage(before);
  return { ...r, cpu_us: (used.user + used.system) / count };
};
for (let i = 0; i < 30; i++) await timed();

if (mode === 'stages' || mode === 'floorstages') {
  const floor = mode === 'floorstages' ? await bareAcceptChain(natsUrl, prefix, payload) : undefined;
  let fn = 0;
  const floorSubmit = async () => {
    const t0 = performance.now();
    await floor.measure({ count: 1, warmup: 0 });
    return t0;
  };
  if (floor) await floor.measure({ count: 100, warmup: 0 });
  // every message in and out of the three connections, by the protocol handler of each (nats-core's own)
  const names = new Map([
    [clientBus.nc.protocol, 'client'],
    [bus.nc.protocol, 'planner'],
    [nc.protocol, 'sub'],
  ]);
  const proto = Object.getPrototypeOf(nc.protocol);
  const { publish, processMsg } = proto;
  let log = [];
  let current = '';
  let previous = '';
  const replyOf = new Map();
  const label = (subject) =>
    subject
      .replaceAll(current, '<id>')
      .replaceAll(previous === '' ? '\u0000' : previous, '<prev>')
      .replaceAll(prefix, 'P')
      .replace(/^\$JS\.ACK\..*$/, '$JS.ACK (intake ack)')
      .replace(/^_INBOX\..*$/, '_INBOX');
  proto.publish = function (subject, data, options) {
    const t = performance.now();
    const l = label(subject);
    if (options?.reply) replyOf.set(options.reply, l);
    if (!names.has(this)) names.set(this, `c${++fn}`);
    log.push([t, names.get(this), 'out', l, process.hrtime.bigint(), options?.reply]);
    return publish.call(this, subject, data, options);
  };
  proto.processMsg = function (msg, data) {
    const t = performance.now();
    const subject = new TextDecoder().decode(msg.subject);
    const r = replyOf.get(subject);
    let l = r === undefined ? label(subject) : `reply to ${r}`;
    if (names.get(this) === 'sub')
      l += ` ${JSON.parse(new TextDecoder().decode(data.subarray(msg.hdr > 0 ? msg.hdr : 0))).type}`;
    if (!names.has(this)) names.set(this, `c${++fn}`);
    log.push([t, names.get(this), 'in', l, process.hrtime.bigint(), subject]);
    return processMsg.call(this, msg, data);
  };
  // socket writes (one per microtask-coalesced flush), by connection
  for (const [h, name] of [...names]) {
    const tr = h.transport;
    const send = tr.send.bind(tr);
    tr.send = (frame) => {
      const text = new TextDecoder().decode(frame.subarray(0, Math.min(frame.length, 4000)));
      const cmds = text
        .split('\r\n')
        .filter((x) => /^(H?PUB|SUB|UNSUB|PING|PONG) /.test(x) || x === 'PING' || x === 'PONG')
        .map((x) => (x.startsWith('UNSUB') ? 'UNSUB' : `${x.split(' ')[0]} ${label(x.split(' ')[1] ?? '')}`));
      log.push([performance.now(), name, 'WRITE', `${cmds.join(' + ')}`, process.hrtime.bigint()]);
      return send(frame);
    };
  }
  const rows = new Map();
  const count = Number(a1 ?? 200);
  const cpu = [];
  const spans = [];
  // delivery, record create written, answered, run.accepted append written, heard (hrtime us), from one submit's log
  const spanOf = () => {
    const at = (who, dir, test, from) =>
      log.findIndex((e, i) => i > from && e[1] === who && e[2] === dir && test(e[3]));
    const d = at('planner', 'in', (l) => l === 'P.runs.submit', -1);
    const c = at('planner', 'out', (l) => l === '$KV.P_runs.<id>', d);
    const cw = at('planner', 'WRITE', (l) => l.includes('$KV.P_runs.<id>'), c);
    const a = log.findIndex((e, i) => i > cw && e[2] === 'in' && e[5] !== undefined && e[5] === log[c][5]);
    const pw = at('planner', 'WRITE', (l) => l.includes('P.runs.<id>.events'), a);
    const h = at('sub', 'in', (l) => l === 'P.runs.<id>.events run.accepted', pw);
    if (d < 0 || c < 0 || cw < 0 || a < 0 || pw < 0 || h < 0) return undefined;
    return [d, cw, a, pw, h].map((i) => Number(log[i][4] / 1000n));
  };
  for (let k = 0; k < count; k++) {
    previous = current;
    current = floor ? `floor-${101 + k}` : `acc-${n + 1}`;
    log = [];
    const c0 = process.cpuUsage();
    let t0 = performance.now();
    if (floor) t0 = await floorSubmit();
    else await timed();
    await new Promise((r) => setImmediate(r));
    const used = process.cpuUsage(c0);
    cpu.push(used.user + used.system);
    const span = floor ? undefined : spanOf();
    if (span !== undefined) spans.push(span);
    const seen = new Map();
    for (const [t, who, dir, l] of log) {
      const key = `${who} ${dir} ${l}`;
      const i = (seen.get(key) ?? 0) + 1;
      seen.set(key, i);
      const k2 = i > 1 ? `${key} #${i}` : key;
      if (!rows.has(k2)) rows.set(k2, []);
      rows.get(k2).push((t - t0) * 1000);
    }
  }
  proto.publish = publish;
  proto.processMsg = processMsg;
  const out = [...rows].map(([k, v]) => [median(v), v.length, k]).sort((x, y) => x[0] - y[0]);
  for (const [t, c, k] of out) console.log(`${t.toFixed(0).padStart(6)} us  ${String(c).padStart(4)}x  ${k}`);
  console.log(
    `cpu per submit+run (median) ${median(cpu).toFixed(0)} us; cpu from submit to accepted heard ${median(cpuToAccepted.slice(-count)).toFixed(0)} us`,
  );
  if (spans.length > 0) {
    const q = (i, j) => {
      const v = spans.map((x) => x[j] - x[i]).sort((x, y) => x - y);
      return `${v[Math.floor(v.length / 4)]}/${v[Math.floor(v.length / 2)]}`;
    };
    console.log(
      `spans (p25/p50 us, ${spans.length} submits): delivered -> create written ${q(0, 1)}, -> answered ${q(1, 2)}, ` +
        `-> run.accepted append written ${q(2, 3)}, -> heard ${q(3, 4)}; delivered -> heard ${q(0, 4)}`,
    );
    if (process.env.PROBE_SPANS)
      (await import('node:fs')).writeFileSync(process.env.PROBE_SPANS, JSON.stringify(spans));
  }
  await floor?.stop();
} else if (mode === 'run') {
  const c0 = process.cpuUsage();
  const count = Number(a1 ?? 1000);
  const p50 = await block(count);
  const used = process.cpuUsage(c0);
  if (process.env.PROBE_WINDOWS)
    (await import('node:fs')).writeFileSync(process.env.PROBE_WINDOWS, JSON.stringify(windows.slice(-count)));
  console.log(
    JSON.stringify({
      p50: Math.round(p50),
      cpu: Math.round((used.user + used.system) / count),
      cpu_to_accepted: Math.round(median(cpuToAccepted.slice(-count))),
    }),
  );
} else {
  const blocks = Number(a1 ?? 5);
  const size = Number(a2 ?? 50);
  const floor = await bareAcceptChain(natsUrl, prefix, payload);
  const tailFloor = await bareAcceptChain(natsUrl, prefix, payload, { tail: true });
  await floor.measure({ count: size, warmup: 50 });
  await tailFloor.measure({ count: size, warmup: 50 });
  const [ours, floors, tails] = await alternated(
    [
      () => withCpu(size, async () => ({ p50_us: await block(size) })),
      () => withCpu(size + 10, () => floor.measure({ count: size, warmup: 10 })),
      () => withCpu(size + 10, () => tailFloor.measure({ count: size, warmup: 10 })),
    ],
    blocks,
  );
  await floor.stop();
  await tailFloor.stop();
  console.log(
    JSON.stringify({
      tail_floor_p50: Math.round(median(tails.map((b) => b.p50_us))),
      tail_vs_floor: +pairedRatio(tails, floors, 'p50_us').toFixed(2),
      ours_vs_tail_floor: +pairedRatio(ours, tails, 'p50_us').toFixed(2),
      tail_floor_cpu: Math.round(median(tails.map((b) => b.cpu_us))),
    }),
  );
  console.log(
    JSON.stringify({
      ours_p50: Math.round(median(ours.map((b) => b.p50_us))),
      floor_p50: Math.round(median(floors.map((b) => b.p50_us))),
      ratio: +pairedRatio(ours, floors, 'p50_us').toFixed(2),
      ours_cpu: Math.round(median(ours.map((b) => b.cpu_us))),
      floor_cpu: Math.round(median(floors.map((b) => b.cpu_us))),
      cpu_ratio: +pairedRatio(ours, floors, 'cpu_us').toFixed(2),
    }),
  );
}
await rig.stop();
