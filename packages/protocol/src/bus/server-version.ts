/**
 * The first nats-server release whose clustered streams check a write's expected last sequence inside the
 * replicated write itself: before it, two compare-and-set writes racing on a replicated KV bucket could both be
 * accepted (nats-server#4320), which agentmesh's leases, checkpoints and daemon trigger queues rely on not happening.
 */
export const SERIALIZED_CAS_SERVER_VERSION = '2.9.21';

/** What a nats-server says of itself on connect (its INFO): its version, and its cluster's name when clustered. */
export interface ServerIdentity {
  version?: string | undefined;
  cluster?: string | undefined;
}

/** `a` before `b`, comparing `major.minor.patch` numerically (a pre-release suffix is ignored). */
function versionBefore(a: string, b: string): boolean {
  const parts = (v: string) =>
    v
      .split(/[-+]/)[0]!
      .split('.')
      .map((n) => Number.parseInt(n, 10) || 0);
  const [x, y] = [parts(a), parts(b)];
  for (let i = 0; i < 3; i++) if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) < (y[i] ?? 0);
  return false;
}

/**
 * A warning for a clustered nats-server older than {@link SERIALIZED_CAS_SERVER_VERSION}, naming what to do; undefined
 * for a newer or a single server (whose writes are serialized).
 */
export function clusteredCasWarning(server: ServerIdentity | undefined): string | undefined {
  const version = server?.version;
  if (server?.cluster === undefined || version === undefined) return undefined;
  if (!versionBefore(version, SERIALIZED_CAS_SERVER_VERSION)) return undefined;
  return (
    `nats-server ${version} in cluster "${server.cluster}" may accept two racing compare-and-set writes to a ` +
    `replicated bucket (nats-server#4320): upgrade every node to ${SERIALIZED_CAS_SERVER_VERSION} or later`
  );
}
