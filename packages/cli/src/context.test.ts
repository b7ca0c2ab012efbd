import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ErrorCode } from '@agentmesh/protocol';
import { loadConfig } from './config.js';
import { replicasSetting } from './context.js';

function config(text: string) {
  const dir = mkdtempSync(join(tmpdir(), 'agentmesh-context-'));
  const path = join(dir, 'agentmesh.yaml');
  writeFileSync(path, text);
  return loadConfig(path);
}

describe('replicas setting', () => {
  it('is 1 by default, nats.replicas from the configuration, AGENTMESH_REPLICAS above both', () => {
    expect(replicasSetting(config('nats:\n  url: nats://a:4222\n'), {})).toBe(1);
    const three = config('nats:\n  url: nats://a:4222,nats://b:4222\n  replicas: 3\n');
    expect(replicasSetting(three, {})).toBe(3);
    expect(replicasSetting(three, { AGENTMESH_REPLICAS: '1' })).toBe(1);
  });

  it('refuses a value JetStream cannot have, naming it', () => {
    expect(() => replicasSetting(config(''), { AGENTMESH_REPLICAS: 'three' })).toThrow(
      expect.objectContaining({
        code: ErrorCode.InvalidConfig,
        message: expect.stringMatching(/AGENTMESH_REPLICAS.*"three"/),
      }),
    );
    expect(() => config('nats:\n  replicas: 0\n')).toThrow(/replicas/);
  });
});
