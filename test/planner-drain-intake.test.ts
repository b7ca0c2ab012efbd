/**
 * A drained planner leaves no pull behind on the durable intake: a run submitted right after a planner drained (its
 * last pull request still open at the server) goes to the next planner at once, not after the intake's ack wait.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { submitRun } from '@agentmesh/planner';
import { startNatsFleet, type NatsFleet } from './helpers/fleet.js';
import { waitForRunEnd } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
let fleet: NatsFleet;

beforeAll(async () => {
  fleet = await startNatsFleet(natsUrl, { prefixTag: 'pdi' });
});
afterAll(() => fleet.stop());

describe('planner drain and the durable intake', () => {
  it('a run submitted just after a planner drained is run by the next planner well before the ack wait', async () => {
    const { client, prefix } = fleet;
    for (let round = 1; round <= 3; round++) {
      const { planner } = await fleet.planner(`pdi-${round}`);
      await planner.drain();
      await fleet.planner(`pdi-next-${round}`);
      const id = `pdi-run-${round}`;
      const t0 = Date.now();
      await submitRun(client, { id, task: 'hello', script: [{ text: 'hi' }] }, { prefix });
      const end = await waitForRunEnd(client, id, { prefix, timeoutMs: 20_000 });
      expect(end).toMatchObject({ type: 'run.completed', status: 'done' });
      // the lease (and ack wait) is 10 s: a run that waited for a lost delivery to time out takes that long
      expect(Date.now() - t0).toBeLessThan(5_000);
      for (const p of fleet.planners) await p.drain();
    }
  }, 90_000);
});
