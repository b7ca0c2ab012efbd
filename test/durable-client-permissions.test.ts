/**
 * The client side of durable runs under the per-role users of deploy/nats/nats.conf: `submitRun` (the run intake)
 * as the client user, and reading a run's stored events (the event log) as the client and ops users, without a
 * permissions violation.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { PermissionViolationError } from '@nats-io/nats-core';
import type { NatsConnection } from '@nats-io/nats-core';
import { NatsBus, ensureRunStreams } from '@agentmesh/protocol';
import { readRunEvents, submitRun } from '@agentmesh/planner';
import { DEPLOY_NATS_CONF, deployPasswords } from './helpers/deploy-nats.js';
import { freePort, startNatsServer, type NatsServerHandle } from './helpers/nats-server.js';

let passwords: ReturnType<typeof deployPasswords>;
let server: NatsServerHandle;
const buses: NatsBus[] = [];
function watch(nc: NatsConnection): string[] {
  const v: string[] = [];
  void (async () => {
    for await (const s of nc.status())
      if (s.type === 'error' && s.error instanceof PermissionViolationError) v.push(s.error.message);
  })();
  return v;
}
beforeAll(async () => {
  passwords = deployPasswords();
  server = await startNatsServer({
    configFile: DEPLOY_NATS_CONF,
    extraArgs: ['-m', String(await freePort())],
  });
  const planner = await NatsBus.connect(server.url, { user: 'planner', pass: passwords.planner });
  buses.push(planner);
  await ensureRunStreams(planner);
});
afterAll(async () => {
  for (const b of buses) await b.close();
  await server.dispose();
});
test('the client submits with submitRun and the client and ops users read stored events, with no violation', async () => {
  for (const role of ['client', 'ops'] as const) {
    const bus = await NatsBus.connect(server.url, { user: role, pass: passwords[role] });
    buses.push(bus);
    const v = watch(bus.nc);
    if (role === 'client') {
      const r = await submitRun(bus, { id: 'perm-1', task: 't' });
      expect(r.seq).toBeGreaterThan(0);
    }
    await readRunEvents(bus, 'perm-1');
    await bus.flush();
    await new Promise((r) => setTimeout(r, 200));
    expect(v, role).toEqual([]);
  }
});
