// temporary probe (not committed): 2 single-thread workers, batches of 8 CPU calls, counts per batch
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { NatsBus, invokeTool } from '@agentmesh/protocol';
const FIX = new URL('../test/fixtures/worker-process.mjs', import.meta.url).pathname;
const port = 20000 + Math.floor(Math.random() * 20000);
const srv = spawn('/usr/sbin/nats-server', ['-js', '-sd', `/tmp/spread/js${port}`, '-p', String(port), '-a', '127.0.0.1'], { stdio: 'ignore' });
await new Promise((r) => setTimeout(r, 300));
const url = `nats://127.0.0.1:${port}`;
const prefix = `probe${process.pid}`;
const kids = await Promise.all([0, 1].map(() => new Promise((resolve, reject) => {
  const c = spawn(process.execPath, [FIX, '--nats', url, '--prefix', prefix, '--tools', 'test', '--threads', '1', '--no-register'], { stdio: ['ignore', 'pipe', 'ignore'], env: { ...process.env, LOG_LEVEL: 'error' } });
  c.once('exit', (code) => reject(new Error('exit ' + code)));
  createInterface({ input: c.stdout }).on('line', (l) => { if (l.includes('"ready":true')) resolve(c); });
})));
const bus = await NatsBus.connect(url);
const cnt = { qg: 0, direct: 0, notices: 0 };
const req = bus.request.bind(bus);
bus.request = (subject, data, o) => { if (subject.endsWith('.tool.invoke.test.hash')) cnt.qg++; else if (subject.includes('.tool.invoke.')) cnt.direct++; return req(subject, data, o); };
bus.subscribe(`${prefix}.tool.capacity.>`, () => cnt.notices++);
let seq = 0;
const per = new Map();
const call = () => invokeTool(bus, { call_id: `c${++seq}`, run_id: 'r', tool: 'test.hash', arguments: { rounds: 60, bytes: 1 << 20, seed: String(seq) } }, { prefix, timeoutMs: 120000 }).then((o) => { if (o.is_error) throw new Error(o.preview); per.set(o.worker_id, (per.get(o.worker_id) ?? 0) + 1); });
const rows = [];
for (let b = 0; b < Number(process.argv[2] ?? 12); b++) {
  cnt.qg = cnt.direct = cnt.notices = 0; per.clear();
  const c0 = process.cpuUsage(); const t0 = performance.now();
  await Promise.all(Array.from({ length: 8 }, call));
  const ms = performance.now() - t0; const c = process.cpuUsage(c0);
  rows.push({ qg: cnt.qg, direct: cnt.direct, notices: cnt.notices, split: [...per.values()].sort().join('+'), cpu: +((c.user + c.system) / 1000).toFixed(1), ms: Math.round(ms) });
}
const rest = rows.slice(2);
const med = (k) => [...rest.map((r) => r[k])].sort((a, b) => a - b)[Math.floor(rest.length / 2)];
console.log(JSON.stringify({ label: process.env.LABEL, sends: med('qg') + '+' + med('direct'), notices: med('notices'), cpu: med('cpu'), ms: med('ms'), splits: rest.map((r) => r.split).join(' ') }));
if (process.env.V) console.table(rows);
await bus.close(); for (const k of kids) k.kill(); srv.kill();
