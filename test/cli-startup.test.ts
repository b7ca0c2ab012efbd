import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { REPO_ROOT, cleanEnv, runAgentmesh, startActor } from './helpers/cli.js';

/**
 * What a fresh `agentmesh` process loads before it does anything: `--help` loads the specs of the commands and
 * nothing else, and each command loads only what it uses. A bound on the modules, not on the clock: an eager import
 * of a heavy package fails here on any machine, however fast.
 */
const RECORDER = join(REPO_ROOT, 'test', 'fixtures', 'record-modules.mjs');
const SDKS = [
  'openai',
  '@anthropic-ai/sdk',
  '@modelcontextprotocol/sdk',
  '@a2a-js/sdk',
  '@opentelemetry/sdk-trace',
  '@opentelemetry/exporter-trace-otlp-proto',
  '@opentelemetry/exporter-trace-otlp-http',
  'prom-client',
  'express',
  'piscina',
];
const dir = mkdtempSync(join(tmpdir(), 'agentmesh-startup-'));
let runs = 0;

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * The environment of a child that records every module it loads into a new file, and that file. Unless `bundled`, the
 * child runs the built modules rather than the bundle, so each module it loads is seen by name.
 */
function recording(
  extra: Record<string, string> = {},
  bundled = false,
): { env: NodeJS.ProcessEnv; modules: () => string[] } {
  const log = join(dir, `modules-${++runs}.txt`);
  const env = cleanEnv({
    ...extra,
    NODE_OPTIONS: `--import=${RECORDER}`,
    AGENTMESH_MODULE_LOG: log,
    AGENTMESH_NO_BUNDLE: bundled ? '0' : '1',
  });
  return { env, modules: () => [...new Set(readFileSync(log, 'utf8').trim().split('\n'))] };
}

/** The packages of node_modules among `modules` (`@scope/name` or `name`). */
function packagesOf(modules: string[]): Set<string> {
  const names = modules.map((m) => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(m)?.[1]);
  return new Set(names.filter((n): n is string => n !== undefined));
}

describe('agentmesh startup', () => {
  it('--help loads the command specs only: no SDK, no NATS, no agentmesh package but the error model', async () => {
    const { env, modules } = recording();
    const r = await runAgentmesh(['--help'], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^usage: agentmesh <command>/m);
    const loaded = modules();
    expect([...packagesOf(loaded)]).toEqual([]);
    expect(loaded.filter((m) => /packages\/(planner|catalog|tool-worker)\//.test(m))).toEqual([]);
    expect(loaded.filter((m) => m.includes('/packages/protocol/'))).toEqual([
      expect.stringMatching(/packages\/protocol\/dist\/errors\.js$/),
    ]);
    expect(loaded.length).toBeLessThan(40);
    expect(loaded.some((m) => m.endsWith('/packages/cli/dist/specs/run.js'))).toBe(true);
  });

  it("a command's --help loads no more than the main help", async () => {
    const { env, modules } = recording();
    const r = await runAgentmesh(['worker', '--help'], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^usage: agentmesh worker/m);
    expect([...packagesOf(modules())]).toEqual([]);
  });

  it('an embedded scripted run loads no provider, MCP, A2A or OpenTelemetry SDK, and no thread pool before a CPU call', async () => {
    const { env, modules } = recording();
    const r = await runAgentmesh(['run', '--script', 'examples/add.json', '--json', 'add 2 and 3'], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n').at(-1)).toMatch(/"type":"run\.completed"/);
    const packages = packagesOf(modules());
    expect(packages.has('@nats-io/nats-core')).toBe(true);
    expect(SDKS.filter((sdk) => packages.has(sdk))).toEqual([]);
    // no configuration file and no skills: nothing to parse as YAML
    expect(packages.has('yaml')).toBe(false);
  });

  it('a worker loads no planner, no provider, MCP, A2A or OpenTelemetry SDK, no metrics client, no thread pool yet', async () => {
    const { env, modules } = recording({
      NATS_URL: inject('natsUrl'),
      AGENTMESH_PREFIX: `startup${process.pid}`,
    });
    const worker = await startActor(['worker', '--tools', 'builtin'], env);
    expect(await worker.stop()).toBe(0);
    const loaded = modules();
    expect(loaded.some((m) => m.includes('/packages/tool-worker/dist/'))).toBe(true);
    expect(loaded.filter((m) => /packages\/(planner|catalog)\//.test(m))).toEqual([]);
    const packages = packagesOf(loaded);
    expect(SDKS.filter((sdk) => packages.has(sdk))).toEqual([]);
    expect(packages.has('yaml')).toBe(false);
  });

  it('a configuration file loads the YAML parser when it is read', async () => {
    const config = join(dir, 'agentmesh.yaml');
    writeFileSync(config, 'not_a_setting: 1\n');
    const { env, modules } = recording();
    const r = await runAgentmesh(
      ['run', '--config', config, '--script', 'examples/add.json', 'add 2 and 3'],
      {
        env,
      },
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/not_a_setting/);
    expect(packagesOf(modules()).has('yaml')).toBe(true);
  });

  it('the command runs the bundle `npm run build` made: a scripted run loads no agentmesh module, bundled library or SDK on its own', async () => {
    const { env, modules } = recording({}, true);
    const r = await runAgentmesh(['run', '--script', 'examples/add.json', '--json', 'add 2 and 3'], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n').at(-1)).toMatch(/"type":"run\.completed"/);
    const loaded = modules();
    expect(loaded, 'npm test builds the bundle first: run "npm run build"').toContainEqual(
      expect.stringMatching(/\/packages\/cli\/dist\/bundle\/main\.js$/),
    );
    expect(loaded.filter((m) => /\/packages\/[^/]+\/dist\/(?!bundle\/)/.test(m))).toEqual([]);
    const packages = packagesOf(loaded);
    expect(['zod', 'ajv', 'pino', '@nats-io/nats-core'].filter((p) => packages.has(p))).toEqual([]);
    expect(SDKS.filter((sdk) => packages.has(sdk))).toEqual([]);
    expect(loaded.length).toBeLessThan(60);
  });

  it('a worker run from the bundle loads no SDK, metrics client or thread pool before it needs one', async () => {
    const { env, modules } = recording(
      { NATS_URL: inject('natsUrl'), AGENTMESH_PREFIX: `startupb${process.pid}` },
      true,
    );
    const worker = await startActor(['worker', '--tools', 'builtin'], env);
    expect(await worker.stop()).toBe(0);
    const loaded = modules();
    expect(loaded).toContainEqual(expect.stringMatching(/\/packages\/cli\/dist\/bundle\/main\.js$/));
    expect(SDKS.filter((sdk) => packagesOf(loaded).has(sdk))).toEqual([]);
  });
});
