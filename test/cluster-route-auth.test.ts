/**
 * Security issue 40, "Cluster routes": a 3-node cluster started from deploy/nats/cluster.conf (the nats.conf it
 * includes, its route authorization, NATS_ROUTES as compose and Kubernetes set it) refuses a server that dials the
 * route port without credentials or with a wrong password: such a server never sees a message published in the
 * cluster. A server that presents the route password joins and does.
 */
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { connect, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import {
  ROUTE_USER,
  routeCount,
  routeUrls,
  startDeployCluster,
  startNatsCluster,
  startRouteCandidate,
  type ClusterNode,
  type NatsClusterHandle,
} from './helpers/nats-cluster.js';

const ROLE_PASSWORDS: Record<string, string> = {
  NATS_CATALOG_PASSWORD: 'pcatalog1',
  NATS_PLANNER_PASSWORD: 'pplanner1',
  NATS_WORKER_PASSWORD: 'pworker1',
  NATS_WORKER_MATH_PASSWORD: 'pworkermath1',
  NATS_CLIENT_PASSWORD: 'pclient1',
  NATS_OPS_PASSWORD: 'pops1',
  NATS_TENANT_ACME_PASSWORD: 'pacme1',
  NATS_TENANT_GLOBEX_PASSWORD: 'pglobex1',
};
const ROUTE_PASSWORD = 'proute-7f3a9c';
/** A subject the client role may publish and the planner role may subscribe to (deploy/nats/nats.conf). */
const SUBJECT = 'agentmesh.runs.r-route-test.cancel';

const until = async (what: string, check: () => Promise<boolean> | boolean, timeoutMs = 20_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

/** Counts what a subscription receives. */
function counter(sub: Subscription): { count: () => number } {
  let n = 0;
  void (async () => {
    for await (const _ of sub) n++;
  })();
  return { count: () => n };
}

let cluster: NatsClusterHandle & { dir: string };
const candidates: ClusterNode[] = [];
const connections: NatsConnection[] = [];

beforeAll(async () => {
  cluster = await startDeployCluster(
    3,
    { ...ROLE_PASSWORDS, NATS_ROUTE_PASSWORD: ROUTE_PASSWORD },
    `${ROUTE_USER}:${ROUTE_PASSWORD}`,
    { user: 'ops', pass: ROLE_PASSWORDS['NATS_OPS_PASSWORD']!, inboxPrefix: '_INBOX_ops' },
  );
  await cluster.waitReady();
}, 60_000);

afterAll(async () => {
  await Promise.all(connections.map((nc) => nc.close()));
  await Promise.all(candidates.map((n) => n.kill()));
  if (cluster) {
    await cluster.dispose();
    rmSync(cluster.dir, { recursive: true, force: true });
  }
});

async function candidate(name: string, credentials?: string): Promise<ClusterNode> {
  const ports = cluster.nodes.map((n) => n.clusterPort);
  const node = await startRouteCandidate(cluster.dir, name, routeUrls(ports, credentials));
  candidates.push(node);
  return node;
}

async function subscriberOn(node: ClusterNode, auth: { user?: string; pass?: string } = {}) {
  const nc = await connect({ servers: node.url, ...auth });
  connections.push(nc);
  const sub = nc.subscribe(SUBJECT);
  await nc.flush();
  return counter(sub);
}

describe('deploy/nats/cluster.conf: route authorization', { timeout: 60_000 }, () => {
  test('the deploy nodes join each other with the route password in NATS_ROUTES', async () => {
    for (const n of cluster.nodes) await until(`${n.name} routes`, async () => (await routeCount(n)) === 2);
  });

  test('a server without the route password is refused and sees nothing; one with it joins', async () => {
    const [n1, n2, n3] = cluster.nodes as [ClusterNode, ClusterNode, ClusterNode];
    const anonymous = await candidate('rogue-anonymous');
    const wrong = await candidate('rogue-wrong', `${ROUTE_USER}:not-the-password`);
    // Each has had its answer: refused (what the fix ensures) or joined (what it prevents).
    for (const rogue of [anonymous, wrong])
      await until(
        `${rogue.name} refused or joined`,
        async () => /Authorization Violation/.test(rogue.logs()) || (await routeCount(rogue)) > 0,
      );
    const rogueSeen = [await subscriberOn(anonymous), await subscriberOn(wrong)];
    const planner = await subscriberOn(n3, {
      user: 'planner',
      pass: ROLE_PASSWORDS['NATS_PLANNER_PASSWORD']!,
    });

    const publisher = await connect({
      servers: n1.url,
      user: 'client',
      pass: ROLE_PASSWORDS['NATS_CLIENT_PASSWORD']!,
    });
    connections.push(publisher);
    const publishUntil = async (what: string, done: () => boolean) =>
      until(what, async () => {
        publisher.publish(SUBJECT, 'cancel');
        await publisher.flush();
        return done();
      });
    await publishUntil('the planner on another node to receive', () => planner.count() > 0);

    const member = await candidate('member', `${ROUTE_USER}:${ROUTE_PASSWORD}`);
    const memberSeen = await subscriberOn(member);
    await publishUntil('the member to receive', () => memberSeen.count() > 0);

    expect(rogueSeen.map((r) => r.count())).toEqual([0, 0]);
    for (const rogue of [anonymous, wrong]) expect(rogue.logs()).toMatch(/Authorization Violation/);
    expect(await routeCount(anonymous)).toBe(0);
    expect(await routeCount(wrong)).toBe(0);
    // the member dials every seed; its routes come up one by one, so it has joined once it has all three
    await until('the member to hold a route to each node', async () => (await routeCount(member)) === 3);
    for (const n of [n1, n2, n3])
      await until(`${n.name} to route to the member`, async () => (await routeCount(n)) === 3);
  });

  test('the test clusters of the failover tests (startNatsCluster) authorize routes the same way', async () => {
    const failover = await startNatsCluster(2);
    try {
      for (const n of failover.nodes) expect(await routeCount(n)).toBe(1);
      const ports = failover.nodes.map((n) => n.clusterPort);
      const rogue = await startRouteCandidate(cluster.dir, 'rogue-test-cluster', routeUrls(ports));
      candidates.push(rogue);
      await until('the rogue refused', () => /Authorization Violation/.test(rogue.logs()));
      expect(await routeCount(rogue)).toBe(0);
    } finally {
      await failover.dispose();
    }
  });
});
