#!/usr/bin/env node
// `npm run bench`: runs every bench/*.bench.mjs against a real nats-server (NATS_URL, or one started here) and
// prints a table of figures with their ratios to the baselines measured in the same run.
// Flags: --json (one JSON object per figure), --quick (fewer iterations), --only NAME[,NAME] (module names).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir, cpus } from 'node:os';
import { benchCores, pinToCores } from './lib.mjs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
const json = argv.includes('--json');
const quick = argv.includes('--quick');
const onlyIdx = argv.indexOf('--only');
const only = onlyIdx >= 0 ? argv[onlyIdx + 1].split(',') : undefined;

async function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function startNats() {
  const bin = ['nats-server', '/usr/sbin/nats-server'].find((b) => spawnSync(b, ['--version']).status === 0);
  if (!bin) throw new Error('nats-server not found: apt-get install -y nats-server, or set NATS_URL');
  const port = await freePort();
  const store = mkdtempSync(join(tmpdir(), 'agentmesh-bench-'));
  const child = spawn(bin, ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', store], { stdio: 'ignore' });
  const cores = benchCores();
  const pinned = cores !== undefined && pinToCores(child.pid, cores.nats);
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise((r) => {
      const c = connect(port, '127.0.0.1');
      c.once('connect', () => (c.destroy(), r(true)));
      c.once('error', () => r(false));
    });
    if (ok) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `nats://127.0.0.1:${port}`,
    pid: child.pid,
    cores: pinned ? cores : undefined,
    stop: () => {
      child.kill('SIGTERM');
      rmSync(store, { recursive: true, force: true });
    },
  };
}

/** The peer libraries of bench/package.json, installed into bench/node_modules on first use (not by the root npm ci). */
function ensurePeers() {
  const peers = Object.keys(JSON.parse(readFileSync(join(here, 'package.json'), 'utf8')).dependencies);
  if (peers.every((p) => existsSync(join(here, 'node_modules', p, 'package.json')))) return;
  console.error(
    `installing the libraries the benchmarks compare with (${peers.join(', ')}) into bench/node_modules...`,
  );
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const r = spawnSync(npm, ['ci', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: here,
    stdio: 'inherit',
  });
  if (r.status !== 0)
    throw new Error(`npm ci in bench/ failed (exit ${r.status}): the peer comparisons need it`);
}

ensurePeers();
const modules = readdirSync(here)
  .filter((f) => f.endsWith('.bench.mjs'))
  .sort()
  .filter((f) => !only || only.includes(f.replace(/\.bench\.mjs$/, '')));

const server = process.env.NATS_URL ? { url: process.env.NATS_URL, stop() {} } : await startNats();
const all = [];
if (!json) {
  console.log(`agentmesh bench: node ${process.version}, ${cpus().length} cores, ${cpus()[0]?.model ?? ''}`);
  const pinning = server.cores ? `, nats-server pinned to core ${server.cores.nats}` : '';
  console.log(`NATS ${server.url}${quick ? ' (quick)' : ''}${pinning}\n`);
}
let failed = false;
try {
  for (const file of modules) {
    const mod = await import(join(here, file));
    const name = file.replace(/\.bench\.mjs$/, '');
    let figures;
    try {
      figures = await mod.run({ natsUrl: server.url, quick, cores: server.cores, serverPid: server.pid });
    } catch (error) {
      failed = true;
      console.error(`bench ${name} failed: ${error?.stack ?? error}`);
      continue;
    }
    for (const f of figures) {
      const row = { bench: name, ...f };
      all.push(row);
      if (json) console.log(JSON.stringify(row));
    }
    if (!json) printTable(mod.title ?? name, figures);
  }
} finally {
  server.stop();
}
process.exitCode = failed ? 1 : 0;

function printTable(title, figures) {
  console.log(`## ${title}`);
  const rows = figures.map((f) => [
    f.name,
    `${f.value} ${f.unit}`,
    f.baseline ?? '',
    f.ratio === undefined ? '' : `${f.ratio}x`,
  ]);
  const head = ['figure', 'value', 'baseline', 'ratio'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (r) => r.map((c, i) => String(c).padEnd(widths[i])).join('  ');
  console.log(line(head));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of rows) console.log(line(r));
  console.log('');
}
