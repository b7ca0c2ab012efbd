import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: { conditions: ['@agentmesh/source'] },
  ssr: { resolve: { conditions: ['@agentmesh/source'] } },
  test: {
    include: ['packages/*/src/**/*.test.ts', 'test/**/*.test.ts'],
    globalSetup: ['test/setup/nats-global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
