import { AgentMeshError, ErrorCode, toErrorPayload, type ToolSpec } from '@agentmesh/protocol';
import type { Rejection } from './rejections.js';
import { compareVersions, type ToolRegistry, type WorkerRecord } from './registry.js';

/** Safety flags whose `true` warns of a risk (confirmation, side effects, spend): a newer version may not drop one. */
const WARNING_FLAGS = [
  'needs_confirmation',
  'mutating',
  'networked',
  'filesystem',
  'process',
  'external_spend',
] as const;

/** The flags `newer` gives up against `older`: warnings dropped, or safety claimed (`read_only`, `idempotent`). */
export function droppedSafety(older: ToolSpec, newer: ToolSpec): string[] {
  const dropped: string[] = WARNING_FLAGS.filter((f) => older.safety[f] && !newer.safety[f]).map(
    (f) => `safety.${f}`,
  );
  if (!older.safety.read_only && newer.safety.read_only) dropped.push('safety.read_only');
  if (!older.idempotent && newer.idempotent) dropped.push('idempotent');
  return dropped;
}

/**
 * The specs a registration's tools are checked against by name: the worker's current record and the registration
 * itself, grouped by name once per registration rather than scanned once per tool.
 */
export class SameName {
  private readonly inRequest = new Map<string, ToolSpec[]>();
  private inRecord: Map<string, ToolSpec[]> | undefined;

  constructor(
    tools: readonly ToolSpec[],
    private readonly record: WorkerRecord | undefined,
  ) {
    group(this.inRequest, tools);
  }

  /** Whether a spec before `spec` in the registration has its name and version. */
  repeats(spec: ToolSpec): boolean {
    const same = this.requested(spec.name);
    if (same.length < 2) return false;
    for (const other of same) {
      if (other === spec) return false;
      if (other.version === spec.version) return true;
    }
    return false;
  }

  /** The specs of `name` in the registration. */
  requested(name: string): readonly ToolSpec[] {
    return this.inRequest.get(name) ?? [];
  }

  /** The specs of `name` in the worker's current record. */
  registered(name: string): readonly ToolSpec[] {
    if (this.record === undefined) return [];
    this.inRecord ??= group(
      new Map(),
      this.record.tools.map((t) => t.spec),
    );
    return this.inRecord.get(name) ?? [];
  }
}

function group(into: Map<string, ToolSpec[]>, specs: readonly ToolSpec[]): Map<string, ToolSpec[]> {
  for (const spec of specs) {
    const same = into.get(spec.name);
    if (same === undefined) into.set(spec.name, [spec]);
    else same.push(spec);
  }
  return into;
}

/**
 * A safety downgrade: `spec` drops a safety flag of a registered version of its tool that is not newer (served by
 * another worker, by this worker's current registration, or in the same registration). The newest version wins, so
 * taking it would silently lift a confirmation or a side-effect warning; a worker re-registering the same version
 * (an MCP server's changed tool list) may not lift one either. Refused whatever the role; once no registration
 * carries the flag (the workers that registered it are gone) it is taken.
 */
export function downgradeRejection(
  spec: ToolSpec,
  workerId: string,
  registry: ToolRegistry,
  sameName: SameName,
): Rejection | undefined {
  const older: ToolSpec[] = [];
  for (const live of registry.liveVersions(spec.name))
    if (live.workers.some((w) => w !== workerId)) older.push(live.spec);
  for (const own of sameName.registered(spec.name)) older.push(own);
  for (const other of sameName.requested(spec.name)) if (other !== spec) older.push(other);
  for (const old of older) {
    if (compareVersions(old.version, spec.version) > 0) continue;
    const dropped = droppedSafety(old, spec);
    if (dropped.length === 0) continue;
    const error = new AgentMeshError(
      ErrorCode.Conflict,
      `safety downgrade: tool "${spec.name}" version "${spec.version}" from worker "${workerId}" drops ` +
        `${dropped.join(', ')} that version "${old.version}" still registered has; keep the flags, or retire ` +
        'the workers that registered it first',
      {
        retryable: false,
        details: {
          reason: 'safety_downgrade',
          name: spec.name,
          version: spec.version,
          worker_id: workerId,
          older_version: old.version,
          dropped,
        },
      },
    );
    return { name: spec.name, error: toErrorPayload(error) };
  }
  return undefined;
}
