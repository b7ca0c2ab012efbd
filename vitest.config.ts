import { configDefaults, defineConfig } from 'vitest/config';

/**
 * The R3 cluster failover test runs on its own (`npm run test:cluster`, about 30 s). Its first cause of flakiness
 * (clients scaling the fleet's R3 assets down to R1) is fixed; it still failed 2 of 19 runs on this machine (runs
 * left unfinished after a 4-6 s KV leader election; docs/cluster.md), so it stays out of `npm test` until that is
 * understood.
 */
const clusterTests = ['test/cluster-failover.test.ts'];

export default defineConfig({
  resolve: { conditions: ['@agentmesh/source'] },
  ssr: { resolve: { conditions: ['@agentmesh/source'] } },
  test: {
    include: ['packages/*/src/**/*.test.ts', 'test/**/*.test.ts'],
    exclude: process.env['AGENTMESH_CLUSTER_TESTS']
      ? configDefaults.exclude
      : [...configDefaults.exclude, ...clusterTests],
    globalSetup: ['test/setup/nats-global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
