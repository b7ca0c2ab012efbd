import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ErrorCode } from '@agentmesh/protocol';
import { loadConfig } from './config.js';
import { replicasConfigured, replicasSetting } from './context.js';

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

describe('replicas configured', () => {
  it('only when AGENTMESH_REPLICAS or nats.replicas says so (else existing assets keep their count)', () => {
    expect(replicasConfigured(config('nats:\n  url: nats://a:4222\n'), {})).toBe(false);
    expect(replicasConfigured(config('nats:\n  url: nats://a:4222\n'), { AGENTMESH_REPLICAS: ' ' })).toBe(
      false,
    );
    expect(replicasConfigured(config('nats:\n  replicas: 1\n'), {})).toBe(true);
    expect(replicasConfigured(config(''), { AGENTMESH_REPLICAS: '3' })).toBe(true);
  });
});
