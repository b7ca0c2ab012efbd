import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';

/**
 * The schema version of every durable record this planner writes (run record, checkpoint, approval, session,
 * trigger, transcript). A record without `schema_version` is version 1, the format before the field existed.
 * A planner reads every version up to this one; a record of a newer version is left for a newer planner.
 */
export const SCHEMA_VERSION = 1;

/** The `schema_version` field every durable record carries. */
export interface Versioned {
  schema_version?: number | undefined;
}

/** The schema version of a stored record: its `schema_version`, 1 when it has none. */
export function schemaVersionOf(record: unknown): number {
  if (typeof record !== 'object' || record === null) return 1;
  const version = (record as Versioned).schema_version;
  return typeof version === 'number' && Number.isInteger(version) && version >= 1 ? version : 1;
}

/** True when a record was written by a newer planner than this one (its format is not understood here). */
export function isNewerSchema(record: unknown): boolean {
  return schemaVersionOf(record) > SCHEMA_VERSION;
}

/** The error for a record of a newer schema version: `unavailable`, retryable (a newer planner reads it). */
export function newerSchemaError(what: string, record: unknown): AgentMeshError {
  const version = schemaVersionOf(record);
  return new AgentMeshError(
    ErrorCode.Unavailable,
    `${what} has schema_version ${version}, newer than this planner understands (${SCHEMA_VERSION}): left for a newer planner`,
    { retryable: true, details: { schema_version: version, supported: SCHEMA_VERSION } },
  );
}

/** Throws {@link newerSchemaError} for a record of a newer version; returns it otherwise. */
export function assertKnownSchema<T>(what: string, record: T): T {
  if (isNewerSchema(record)) throw newerSchemaError(what, record);
  return record;
}

/**
 * A record as it is written: `record` stamped with this planner's {@link SCHEMA_VERSION}. Every durable record goes
 * through this (or sets the field itself), so a newer planner can tell which format it holds.
 */
export function withSchemaVersion<T extends object>(record: T): T & { schema_version: number } {
  return { ...record, schema_version: SCHEMA_VERSION };
}

/**
 * A stored record as it is read: the decoded value when its version is one this planner knows, `undefined` for an
 * absent value; a record of a newer version throws {@link newerSchemaError} (`unavailable`, retryable) naming `what`,
 * so the caller leaves it untouched for a newer planner.
 */
export function readVersioned<T>(what: string, value: T | undefined): T | undefined {
  return value === undefined ? undefined : assertKnownSchema(what, value);
}
