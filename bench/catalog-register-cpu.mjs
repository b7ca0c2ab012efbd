// CPU time of the catalog process per registration (100 workers x 100 tools over NATS), builds alternated:
//   NATS_URL=nats://127.0.0.1:4222 node bench/catalog-register-cpu.mjs [--rounds 5] NAME=path/to/catalog/dist/index.js ...
// NAME=floor runs the bare responder of the `register floor` figure instead of a catalog, NAME=checked the one of
// `register floor + checks` (it parses, validates and hashes each request first). The catalog runs in a
// child process of its own, so its CPU time (process.cpuUsage between marks) leaves out the client and holds up on a
// busy machine where wall time does not. Not a *.bench.mjs: `npm run bench` does not run it.
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { NatsBus, encodeJson, silentLogger, subjects } from '@agentmesh/protocol';
import { checkedFloor, registerAll, syntheticTools } from './catalog.bench.mjs';

const cpuMs = (since) => {
  const d = process.cpuUsage(since);
  return (d.user + d.system) / 1000;
};

async function child(modPath, natsUrl, prefix, bucket) {
  let catalog;
  if (modPath === 'floor' || modPath === 'checked') {
    const check = modPath === 'checked' ? checkedFloor : () => undefined;
    const { connect } = await import('@nats-io/transport-node');
    const { Kvm } = await import('@nats-io/kv');
    const nc = await connect({ servers: natsUrl, noAsyncTraces: true });
    const kv = await new Kvm(nc).create(bucket, { history: 1 });
    const reply = encodeJson({ accepted: [], rejected: [], ttl_ms: 10_000 });
    let n = 0;
    nc.subscribe(subjects(prefix).catalogRegister, {
      callback: (_e, m) => {
        check(m.data);
        void kv.put(`workers.w${n++}`, m.data).then(() => m.respond(reply));
      },
    });
    await nc.flush();
    catalog = { toolNames: () => [], stop: () => nc.close() };
  } else {
    const { Catalog } = await import(pathToFileURL(modPath).href);
    const bus = await NatsBus.connect(natsUrl, { logger: silentLogger() });
    catalog = new Catalog({ bus, prefix, bucket, logger: silentLogger() });
    await catalog.start();
  }
  let last = process.cpuUsage();
  process.on('message', (m) => {
    if (m === 'mark') {
      process.send({ cpuMs: cpuMs(last), tools: catalog.toolNames().length });
      last = process.cpuUsage();
    } else void Promise.resolve(catalog.stop()).finally(() => process.exit(0));
  });
  process.send('ready');
}

async function parent(argv) {
  const natsUrl = process.env.NATS_URL;
  if (!natsUrl) throw new Error('set NATS_URL');
  const roundsAt = argv.indexOf('--rounds');
  const rounds = roundsAt >= 0 ? Number(argv[roundsAt + 1]) : 5;
  const variants = argv.filter((a) => a.includes('=')).map((a) => a.split('='));
  const client = await NatsBus.connect(natsUrl, { logger: silentLogger() });
  const tools = syntheticTools(10000);
  const warm = tools
    .slice(0, 2000)
    .map((t) => ({ ...t, name: `warm${t.name}`, namespace: `warm${t.namespace}` }));
  const results = {};
  const ask = (c) => new Promise((r) => (c.once('message', r), c.send('mark')));
  for (let round = 0; round < rounds; round++)
    for (const [name, path] of round % 2 === 0 ? variants : [...variants].reverse()) {
      const id = randomUUID().slice(0, 8);
      const prefix = `cpu${id}`;
      const c = fork(fileURLToPath(import.meta.url), ['--child', path, natsUrl, prefix, `cpu_${id}`]);
      await new Promise((r) => c.once('message', r));
      // warms the catalog's code on other tools (another worker prefix: the measured workers register fresh)
      await registerAll(client, prefix, warm, { workerPrefix: 'warm-w' });
      await new Promise((r) => setTimeout(r, 200));
      await ask(c);
      const t0 = performance.now();
      await registerAll(client, prefix, tools);
      const wall = performance.now() - t0;
      const { cpuMs: cpu } = await ask(c);
      await new Promise((r) => setTimeout(r, 500)); // the search index catches up once registrations stop
      const { cpuMs: index, tools: held } = await ask(c);
      if (path !== 'floor' && path !== 'checked' && held < 10000)
        throw new Error(`${name} holds ${held} tools`);
      (results[name] ??= []).push({ wall, cpu, index });
      console.log(
        `${name}: wall ${wall.toFixed(0)} ms, cpu ${cpu.toFixed(0)} ms, index catch-up ${index.toFixed(0)} ms`,
      );
      const exited = new Promise((r) => c.once('exit', r));
      c.send('stop');
      await exited;
      const jsm = await client.jetstreamManager();
      await jsm.streams.delete(`KV_cpu_${id}`).catch(() => undefined);
    }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  for (const [name, rs] of Object.entries(results)) {
    const range = (xs) =>
      `${(median(xs) / 100).toFixed(2)} ms (${(Math.min(...xs) / 100).toFixed(2)}-${(Math.max(...xs) / 100).toFixed(2)})`;
    // the index catches up 50 ms after the last change: on a loaded machine that can fall inside the window, so the
    // sum of both is the figure that holds up
    console.log(
      `${name}: catalog CPU per registration ${range(rs.map((r) => r.cpu))} during the registrations, ` +
        `${range(rs.map((r) => r.cpu + r.index))} with the index catch-up; wall ${median(rs.map((r) => r.wall)).toFixed(0)} ms`,
    );
  }
  await client.close();
}

if (process.argv[2] === '--child') await child(...process.argv.slice(3));
else await parent(process.argv.slice(2));
