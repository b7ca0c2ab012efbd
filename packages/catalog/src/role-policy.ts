import {
  AgentMeshError,
  ErrorCode,
  WORKER_ROLE_PATTERN,
  isToolName,
  toErrorPayload,
  type ToolSpec,
} from '@agentmesh/protocol';
import type { Rejection } from './rejections.js';

/** Which tool namespaces the workers of each role may register: role -> namespaces (`*`: any tool). */
export type RegistrationRoles = Readonly<Record<string, readonly string[]>>;

/**
 * The catalog's registration policy. Without roles, any registration is taken (single-tenant deployments). With
 * roles, a worker registers on `<prefix>.catalog.register.<role>` (the subject, which NATS permissions grant per
 * user, is its identity: never the message body), only for a configured role, and only tools inside the role's
 * namespaces: `math` covers `math` and `math.*`, `mcp.github` covers `mcp.github.*`, `*` covers every tool.
 */
export class RegistrationPolicy {
  private readonly roles: ReadonlyMap<string, readonly string[]> | undefined;

  constructor(roles: RegistrationRoles | undefined) {
    this.roles = roles === undefined ? undefined : checkRoles(roles);
  }

  /** Whether registration is scoped to roles (the unscoped subject is then refused). */
  get scoped(): boolean {
    return this.roles !== undefined;
  }

  /**
   * The namespaces a registration on `role`'s subject (undefined: the unscoped subject) may claim, undefined for
   * any; `permission_denied` for a registration the policy refuses whole.
   */
  namespacesOf(role: string | undefined, subject: string): readonly string[] | undefined {
    if (this.roles === undefined) return undefined;
    const known = [...this.roles.keys()].join(', ');
    if (role === undefined)
      throw new AgentMeshError(
        ErrorCode.PermissionDenied,
        `this catalog takes registrations only on ${subject}.<role> (its roles: ${known}); ` +
          `"${subject}" carries no role`,
        { retryable: false, details: { subject, roles: [...this.roles.keys()] } },
      );
    const namespaces = this.roles.get(role);
    if (namespaces === undefined)
      throw new AgentMeshError(
        ErrorCode.PermissionDenied,
        `role "${role}" may register no tools on this catalog (its roles: ${known})`,
        { retryable: false, details: { role, roles: [...this.roles.keys()] } },
      );
    return namespaces.includes('*') ? undefined : namespaces;
  }
}

/** Whether `name` lies inside one of `namespaces` (undefined: any name). */
export function inNamespaces(name: string, namespaces: readonly string[] | undefined): boolean {
  return namespaces === undefined || namespaces.some((ns) => name === ns || name.startsWith(`${ns}.`));
}

/** A tool outside its worker's role: `permission_denied` naming the tool, the role and the role's namespaces. */
export function outsideRoleRejection(
  spec: ToolSpec,
  workerId: string,
  role: string,
  namespaces: readonly string[],
): Rejection {
  const error = new AgentMeshError(
    ErrorCode.PermissionDenied,
    `worker "${workerId}" (role "${role}") may not register tool "${spec.name}": role "${role}" may register ` +
      `the namespaces ${namespaces.map((n) => `"${n}"`).join(', ')} only`,
    {
      retryable: false,
      details: {
        name: spec.name,
        version: spec.version,
        worker_id: workerId,
        role,
        namespaces: [...namespaces],
      },
    },
  );
  return { name: spec.name, error: toErrorPayload(error) };
}

/** A worker id another role registered: a worker may not replace the record of a worker of another role. */
export function foreignWorkerError(workerId: string, role: string | undefined, owner: string | undefined) {
  return new AgentMeshError(
    ErrorCode.PermissionDenied,
    `worker id "${workerId}" is registered by role "${owner ?? '(none)'}"; role "${role ?? '(none)'}" may not ` +
      'replace its registration',
    { retryable: false, details: { worker_id: workerId, role: role ?? null, owner: owner ?? null } },
  );
}

function checkRoles(roles: RegistrationRoles): Map<string, readonly string[]> {
  const out = new Map<string, readonly string[]>();
  for (const [role, namespaces] of Object.entries(roles)) {
    if (!WORKER_ROLE_PATTERN.test(role))
      throw new AgentMeshError(
        ErrorCode.InvalidConfig,
        `catalog role "${role}" must match ${WORKER_ROLE_PATTERN.source}`,
        { retryable: false, details: { role } },
      );
    for (const ns of namespaces)
      if (ns !== '*' && !isToolName(ns))
        throw new AgentMeshError(
          ErrorCode.InvalidConfig,
          `namespace "${ns}" of catalog role "${role}" is neither "*" nor a tool-name prefix such as "math" or "mcp.github"`,
          { retryable: false, details: { role, namespace: ns } },
        );
    out.set(role, [...namespaces]);
  }
  return out;
}

/**
 * Parses the compact form of the roles (`AGENTMESH_CATALOG_ROLES`): `role=ns,ns;role=ns`, e.g.
 * `worker=*;worker_math=math`.
 */
export function parseRegistrationRoles(text: string): RegistrationRoles {
  const roles: Record<string, string[]> = {};
  for (const part of text.split(';')) {
    if (part.trim() === '') continue;
    const at = part.indexOf('=');
    const role = part.slice(0, at).trim();
    if (at <= 0 || role === '')
      throw new AgentMeshError(
        ErrorCode.InvalidConfig,
        `catalog roles entry "${part.trim()}" is not role=namespace[,namespace...] (e.g. worker_math=math)`,
        { retryable: false, details: { entry: part.trim() } },
      );
    roles[role] = part
      .slice(at + 1)
      .split(',')
      .map((ns) => ns.trim())
      .filter((ns) => ns !== '');
  }
  checkRoles(roles);
  return roles;
}
