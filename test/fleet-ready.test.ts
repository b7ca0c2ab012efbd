/**
 * The readiness check of deploy/try-compose.sh (deploy/fleet-ready.mjs) against what `agentmesh status --json`
 * prints for a real fleet: not ready while the tool worker is missing, ready once it serves.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNatsServer, type NatsServerHandle } from './helpers/nats-server.js';
import { REPO_ROOT, cleanEnv, runAgentmesh, startActor, type ActorProcess } from './helpers/cli.js';

const CHECK = join(REPO_ROOT, 'deploy', 'fleet-ready.mjs');

function fleetReady(statusJson: string, workers?: number): { code: number | null; out: string } {
  const r = spawnSync(process.execPath, [CHECK, ...(workers ? ['--workers', String(workers)] : [])], {
    input: statusJson,
    encoding: 'utf8',
  });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

describe('try-compose readiness check on the status of a real fleet', () => {
  let nats: NatsServerHandle;
  const actors: ActorProcess[] = [];
  const env = () => cleanEnv({ NATS_URL: nats.url });
  const statusJson = async () => {
    const r = await runAgentmesh(['status', '--json'], { env: env(), timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    return r.stdout;
  };

  beforeAll(async () => {
    nats = await startNatsServer();
  });
  afterAll(async () => {
    await Promise.all(actors.map((a) => a.stop()));
    await nats?.dispose();
  });

  it('try-compose waits on this check, fed by status --json', () => {
    const script = readFileSync(join(REPO_ROOT, 'deploy', 'try-compose.sh'), 'utf8');
    expect(script).toMatch(/status --json[^\n]*\| node deploy\/fleet-ready\.mjs/);
    expect(script).not.toMatch(/grep -q 'agentmesh-tool-worker'/);
  });

  it('says not ready, and what is missing, before the worker is up; ready once it serves', async () => {
    const empty = fleetReady(await statusJson());
    expect(empty.code).toBe(1);
    expect(empty.out).toMatch(/fleet not ready: 0 of 1 catalog serving; 0 of 1 planner serving/);

    actors.push(await startActor(['catalog'], env()));
    actors.push(await startActor(['planner'], env()));
    const noWorker = fleetReady(await statusJson());
    expect(noWorker.code).toBe(1);
    expect(noWorker.out).toBe('fleet not ready: 0 of 1 tool-worker serving; the catalog knows no tool\n');

    actors.push(await startActor(['worker'], env()));
    const status = await statusJson();
    const ready = fleetReady(status);
    expect(ready.out).toMatch(/^fleet ready: 1 catalog, 1 planner, 1 tool-worker, \d+ tools\n$/);
    expect(ready.code).toBe(0);
    const two = fleetReady(status, 2);
    expect(two.code).toBe(1);
    expect(two.out).toMatch(/1 of 2 tool-worker serving/);
  });

  it('says not ready for output that is not JSON, and refuses a bad --workers', () => {
    expect(fleetReady('NATS is unreachable')).toMatchObject({
      code: 1,
      out: expect.stringMatching(/no JSON/),
    });
    const bad = spawnSync(process.execPath, [CHECK, '--workers', 'x'], { input: '{}', encoding: 'utf8' });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--workers takes a whole number/);
  });
});
