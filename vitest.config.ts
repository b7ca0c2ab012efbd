import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: { conditions: ['@agentmesh/source'] },
  ssr: { resolve: { conditions: ['@agentmesh/source'] } },
  test: {
    globalSetup: ['test/setup/nats-global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    projects: [
      {
        // Each package's own tests: two at a time in workers that keep their imports between files (a test that needs
        // a module's state fresh asks for it with vi.resetModules).
        extends: true,
        test: {
          name: 'packages',
          include: ['packages/*/src/**/*.test.ts'],
          isolate: false,
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        // Processes, clusters, faults and timings: one file at a time, each in a fresh worker.
        extends: true,
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
