import {
  AgentMeshError,
  ErrorCode,
  toErrorPayload,
  type CatalogRegisterReply,
  type ToolSpec,
} from '@agentmesh/protocol';

/** A tool a registration refused, with the reason as the worker gets it. */
export type Rejection = CatalogRegisterReply['rejected'][number];

/** A refused tool: `message` says why. */
export function registerRejection(spec: ToolSpec, workerId: string, message: string): Rejection {
  return {
    name: spec.name,
    error: toErrorPayload(
      new AgentMeshError(ErrorCode.Conflict, message, {
        retryable: false,
        details: { name: spec.name, version: spec.version, worker_id: workerId },
      }),
    ),
  };
}

/** A tool whose spec differs from the one other live workers serve under the same name and version. */
export function conflictRejection(
  spec: ToolSpec,
  hash: string,
  workerId: string,
  servingWorkers: string[],
  servingHash: string,
): Rejection {
  const serving = servingWorkers.map((w) => `"${w}"`).join(', ');
  const error = new AgentMeshError(
    ErrorCode.Conflict,
    `tool "${spec.name}" version "${spec.version}" from worker "${workerId}" differs from the spec worker ${serving} ` +
      `already serve${servingWorkers.length === 1 ? 's' : ''} (spec hash ${hash.slice(0, 12)} vs ${servingHash.slice(0, 12)}); ` +
      'give the new spec a new version to roll it out',
    {
      retryable: false,
      details: {
        name: spec.name,
        version: spec.version,
        worker_id: workerId,
        serving_workers: servingWorkers,
        hash,
        serving_hash: servingHash,
      },
    },
  );
  return { name: spec.name, error: toErrorPayload(error) };
}
