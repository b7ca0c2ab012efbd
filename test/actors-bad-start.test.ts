/**
 * Actors started before NATS is up: each waits with backoff, says not-ready on /readyz and in its logs, and becomes
 * ready on its own once the server comes up, without a restart.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, startNatsServer, type NatsServerHandle } from './helpers/nats-server.js';
import { cleanEnv, runAgentmesh, startActor, type ActorProcess } from './helpers/cli.js';
import { until } from './helpers/wait.js';

async function readyz(port: number): Promise<number | undefined> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/readyz`)).status;
  } catch {
    return undefined;
  }
}

describe('actors started before the nats-server', () => {
  let nats: NatsServerHandle | undefined;
  const actors: ActorProcess[] = [];

  afterAll(async () => {
    await Promise.all(actors.map((a) => a.stop('SIGKILL')));
    await nats?.dispose();
  });

  it('wait for NATS, answer 503 meanwhile, then become ready and complete a run', async () => {
    const natsPort = await freePort();
    const url = `nats://127.0.0.1:${natsPort}`;
    const env = cleanEnv({ NATS_URL: url });
    const kinds = ['catalog', 'planner', 'worker'] as const;
    const healthPorts: number[] = [];
    for (const kind of kinds) {
      const healthPort = await freePort();
      healthPorts.push(healthPort);
      actors.push(await startActor([kind, '--health-port', String(healthPort)], env, /waiting for NATS at/));
    }
    for (const [i, actor] of actors.entries()) {
      expect(actor.logs()).toContain(`waiting for NATS at ${url}`);
      expect(actor.logs()).toMatch(/retrying in \d+ ms/);
      expect(await readyz(healthPorts[i]!)).toBe(503);
      expect(actor.child.exitCode).toBeNull();
    }

    nats = await startNatsServer({ port: natsPort });
    await until(
      'every actor ready on /readyz',
      async () => {
        const codes = await Promise.all(healthPorts.map(readyz));
        return codes.every((c) => c === 200);
      },
      60_000,
    );
    for (const actor of actors) expect(actor.child.exitCode).toBeNull();

    const run = await runAgentmesh(['run', '--script', 'examples/add.json', '--json', 'add 2 and 3'], {
      env,
      timeoutMs: 60_000,
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/"type":"run\.completed"/);
    expect(run.stdout).toMatch(/2 \+ 3 = 5/);
  }, 120_000);
});
