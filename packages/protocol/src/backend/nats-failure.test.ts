import { describe, expect, it } from 'vitest';
import { AgentMeshError, ErrorCode } from '../errors.js';
import type { JetStreamManager } from '@nats-io/jetstream';
import { ensureStream, natsFailure } from './nats-assets.js';

describe('natsFailure: whether opening an asset may try again, as data on the error', () => {
  it('a JetStream API timeout or missing responder is a retryable unavailable', () => {
    for (const message of [
      'timeout',
      'TimeoutError: timed out',
      '503 no responders available',
      'insufficient resources',
    ]) {
      const e = natsFailure(new Error(message));
      expect(e).toMatchObject({ code: ErrorCode.Unavailable, retryable: true });
      expect(e.message).toBe(message);
    }
  });

  it('a refused setting or a permissions violation fails at once, keeping its code', () => {
    const refused = new AgentMeshError(
      ErrorCode.InvalidConfig,
      'replicas > 1 not supported in non-clustered mode',
      {
        retryable: false,
      },
    );
    expect(natsFailure(refused)).toBe(refused);
    expect(
      natsFailure(new Error('Permissions Violation for Publish to "$JS.API.STREAM.CREATE.X" (timeout)')),
    ).toMatchObject({ retryable: false });
    expect(natsFailure(new Error('stream name already in use with a different configuration'))).toMatchObject(
      {
        retryable: false,
      },
    );
  });
});

describe('ensureStream when JetStream fails while it creates the stream', () => {
  const failingAdd = (message: string) =>
    ({
      streams: {
        info: () => Promise.reject(new Error('stream not found')),
        add: () => Promise.reject(new Error(message)),
      },
    }) as unknown as JetStreamManager;

  it('a timeout (the node creating the R3 bucket was killed) is a retryable unavailable naming the asset', async () => {
    const error = await ensureStream(failingAdd('timeout'), {
      name: 'KV_agentmesh_catalog',
      num_replicas: 3,
    }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: ErrorCode.Unavailable, retryable: true });
    expect((error as Error).message).toMatch(/KV_agentmesh_catalog.*replicas 3: timeout/);
  });

  it('a refused setting stays an invalid_config that fails at once', async () => {
    const error = await ensureStream(failingAdd('replicas > 1 not supported in non-clustered mode'), {
      name: 'KV_x',
      num_replicas: 3,
    }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: ErrorCode.InvalidConfig, retryable: false });
  });
});
