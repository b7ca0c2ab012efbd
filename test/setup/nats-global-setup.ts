import { existsSync } from 'node:fs';
import type { TestProject } from 'vitest/node';
import { NATS_INSTALL_HINT, findNatsServerBinary, startNatsServer } from '../helpers/nats-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    natsUrl: string;
  }
}

async function dockerAnswers(): Promise<boolean> {
  if (!process.env['DOCKER_HOST'] && !existsSync('/var/run/docker.sock')) return false;
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await Promise.race([
      getContainerRuntimeClient(),
      new Promise((_, reject) => setTimeout(() => reject(new Error('docker did not answer')), 3000)),
    ]);
    return true;
  } catch {
    return false;
  }
}

/**
 * Gives every test a NATS URL with JetStream: NATS_URL when set, else a testcontainers NATS when a Docker engine
 * answers, else a nats-server binary on a free port with a temporary store. Without any, it fails with the
 * install command: NATS tests never skip silently.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const fromEnv = process.env['NATS_URL'];
  if (fromEnv) {
    project.provide('natsUrl', fromEnv);
    return async () => undefined;
  }
  if (findNatsServerBinary() === undefined && (await dockerAnswers())) {
    const { GenericContainer, Wait } = await import('testcontainers');
    const container = await new GenericContainer('nats:2.10-alpine')
      .withCommand(['-js'])
      .withExposedPorts(4222)
      .withWaitStrategy(Wait.forLogMessage(/Server is ready/))
      .start();
    const url = `nats://${container.getHost()}:${container.getMappedPort(4222)}`;
    project.provide('natsUrl', url);
    process.env['AGENTMESH_TEST_NATS_URL'] = url;
    return async () => {
      await container.stop();
    };
  }
  if (findNatsServerBinary() === undefined) throw new Error(NATS_INSTALL_HINT);
  const server = await startNatsServer();
  project.provide('natsUrl', server.url);
  process.env['AGENTMESH_TEST_NATS_URL'] = server.url;
  return async () => {
    await server.dispose();
  };
}
