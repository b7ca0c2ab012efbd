import { describe, expect, it } from 'vitest';
import { isAgentMeshError } from '@agentmesh/protocol';
import { SCHEMA_VERSION, readVersioned, schemaVersionOf, withSchemaVersion } from './versions.js';

describe('schema versions of durable records', () => {
  it('withSchemaVersion stamps the current version and keeps the record', () => {
    const written = withSchemaVersion({ run_id: 'r1', schema_version: 0, tenant: 't' });
    expect(written).toEqual({ run_id: 'r1', tenant: 't', schema_version: SCHEMA_VERSION });
  });

  it('readVersioned passes known versions and absent values, refuses a newer one untouched', () => {
    expect(readVersioned('queued run', { id: 'a' })).toEqual({ id: 'a' });
    expect(readVersioned('queued run', undefined)).toBeUndefined();
    const newer = { id: 'b', schema_version: SCHEMA_VERSION + 1 };
    let error: unknown;
    try {
      readVersioned('queued run', newer);
    } catch (e) {
      error = e;
    }
    expect(isAgentMeshError(error) && error.code).toBe('unavailable');
    expect(String((error as Error).message)).toContain('queued run has schema_version 2');
    expect(schemaVersionOf(newer)).toBe(SCHEMA_VERSION + 1);
  });
});
