// Cold start: the wall time of a fresh `agentmesh` process, as a user or an autoscaler pays it, next to `node -e 0`
// measured in the same rounds. Each round spawns every contender once, in turn (so a slow moment of the machine
// falls on all of them), and each figure is the median of its rounds. The worker figure runs from spawn to the
// first moment the process both answers `$SRV.PING` and is registered with a catalog (started here, in-process).
// AGENTMESH_BENCH_CLI=path/to/agentmesh.js measures another build of the CLI (e.g. the one before a change).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { NatsBus, ServiceName, silentLogger } from '@agentmesh/protocol';
import { Catalog } from '@agentmesh/catalog';
import { bundleIsCurrent } from '../packages/cli/bin/bundle-stamp.js';
import { figure, median } from './lib.mjs';

export const title = 'Cold start: a fresh process to first use, against node -e 0 (median of rounds)';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI =
  process.env.AGENTMESH_BENCH_CLI ??
  fileURLToPath(new URL('../packages/cli/bin/agentmesh.js', import.meta.url));
const POLL_MS = 2;

/** The environment of a contender: quiet logs, no provider keys, no NATS unless given. */
function env(extra = {}) {
  const e = { ...process.env, LOG_LEVEL: 'warn' };
  for (const k of ['NATS_URL', 'AGENTMESH_CONFIG', 'OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'AGENTMESH_PREFIX'])
    delete e[k];
  return { ...e, ...extra };
}

/** Milliseconds from spawn to exit; rejects on a non-zero exit. */
function timeToExit(args, extraEnv) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      env: env(extraEnv),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.once('exit', (code) => {
      const ms = performance.now() - t0;
      if (code === 0) resolve(ms);
      else reject(new Error(`${args.join(' ')} exited with ${code}: ${stderr}`));
    });
  });
}

/** Answers of `$SRV.PING.agentmesh-tool-worker`, by pid (the worker id carries it). */
function pingWatcher(bus) {
  const inbox = `_INBOX.coldstart.${process.pid}.${Date.now()}`;
  const answered = new Set();
  const sub = bus.subscribe(inbox, (msg) => {
    const id = JSON.parse(msg.text())?.metadata?.worker_id ?? '';
    const pid = /-(\d+)-[0-9a-f]+$/.exec(id)?.[1];
    if (pid !== undefined) answered.add(Number(pid));
  });
  return {
    ping: () => bus.publish(`$SRV.PING.${ServiceName.ToolWorker}`, '', { reply: inbox }),
    answered: (pid) => answered.has(pid),
    stop: () => sub.unsubscribe(),
  };
}

/** Milliseconds from spawning `agentmesh worker` to it answering PING and being registered; then stops it. */
async function workerToServing(natsUrl, prefix, catalog, pings) {
  const t0 = performance.now();
  const child = spawn(process.execPath, [CLI, 'worker', '--tools', 'builtin'], {
    cwd: ROOT,
    env: env({ NATS_URL: natsUrl, AGENTMESH_PREFIX: prefix }),
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  let ms;
  while (ms === undefined) {
    if (child.exitCode !== null) throw new Error(`agentmesh worker exited with ${child.exitCode}: ${stderr}`);
    pings.ping();
    await new Promise((r) => setTimeout(r, POLL_MS));
    if (pings.answered(child.pid) && catalog.toolNames().length > 0) ms = performance.now() - t0;
  }
  child.kill('SIGTERM');
  await exited;
  while (catalog.toolNames().length > 0) await new Promise((r) => setTimeout(r, POLL_MS));
  return ms;
}

export async function run({ natsUrl, quick }) {
  if (process.env.AGENTMESH_BENCH_CLI === undefined && !bundleIsCurrent())
    console.error(
      'cold start: the CLI bundle is older than the build (a `tsc -b` since `npm run build`), so these figures are of the unbundled modules; run `npm run build` first',
    );
  const rounds = quick ? 3 : 9;
  const prefix = `bcold${process.pid}`;
  const bus = await NatsBus.connect(natsUrl);
  const catalog = new Catalog({ bus, prefix, logger: silentLogger() });
  await catalog.start();
  const pings = pingWatcher(bus);
  const samples = { node: [], help: [], worker: [], run: [] };
  try {
    await workerToServing(natsUrl, prefix, catalog, pings); // creates the JetStream assets a first worker would
    for (let i = 0; i < rounds; i++) {
      samples.node.push(await timeToExit(['-e', '0']));
      samples.help.push(await timeToExit([CLI, '--help']));
      samples.worker.push(await workerToServing(natsUrl, prefix, catalog, pings));
      samples.run.push(await timeToExit([CLI, 'run', '--script', 'examples/add.json', 'add 2 and 3']));
    }
  } finally {
    pings.stop();
    await catalog.stop();
    await dropPrefix(bus, prefix);
    await bus.close();
  }
  const node = figure('cold start: node -e 0', median(samples.node), 'ms');
  return [
    node,
    figure('cold start: agentmesh --help', median(samples.help), 'ms', node),
    figure('cold start: worker spawn to serving', median(samples.worker), 'ms', node),
    figure('cold start: run --script examples/add.json', median(samples.run), 'ms', node),
  ];
}

/** Drops the streams (KV buckets, object stores) the catalog and the workers made under the bench's prefix. */
async function dropPrefix(bus, prefix) {
  const jsm = await bus.jetstreamManager();
  for await (const s of jsm.streams.list())
    if (s.config.name.toLowerCase().includes(prefix))
      await jsm.streams.delete(s.config.name).catch(() => undefined);
}
