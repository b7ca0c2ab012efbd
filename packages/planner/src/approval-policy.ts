import { matchesAnyToolPattern } from '@agentmesh/protocol';

/** `approvals:` in the configuration: which calls wait for a human. */
export interface ApprovalConfig {
  /** Tool names, namespaces or globs that always need approval. */
  require?: readonly string[];
  /** Tool names, namespaces or globs exempt from approval (wins over `require` and `needs_confirmation`). */
  auto_approve?: readonly string[];
  /** A pending approval older than this ends as denied with reason `timeout` (0 = wait forever). */
  timeout_ms?: number;
}

/**
 * The policy of one run: the configured one, extended by the run request. A request can add requirements and
 * exempt calls that only its own requirements caught, never remove a configured requirement.
 */
export interface ApprovalPolicy {
  readonly configured: Required<Pick<ApprovalConfig, 'require' | 'auto_approve'>>;
  readonly requested: Required<Pick<ApprovalConfig, 'require' | 'auto_approve'>>;
  readonly timeoutMs: number;
}

export function approvalPolicy(
  configured: ApprovalConfig = {},
  requested: ApprovalConfig = {},
): ApprovalPolicy {
  const timeouts = [configured.timeout_ms, requested.timeout_ms].filter(
    (t): t is number => t !== undefined && t > 0,
  );
  return {
    configured: { require: configured.require ?? [], auto_approve: configured.auto_approve ?? [] },
    requested: { require: requested.require ?? [], auto_approve: requested.auto_approve ?? [] },
    timeoutMs: timeouts.length === 0 ? 0 : Math.min(...timeouts),
  };
}

/** Why a call needs approval, or undefined when it may run at once. */
export function approvalReason(
  name: string,
  safety: { needs_confirmation?: boolean } | undefined,
  policy: ApprovalPolicy,
): string | undefined {
  if (matchesAnyToolPattern(name, policy.configured.auto_approve)) return undefined;
  if (safety?.needs_confirmation === true) return 'the tool needs confirmation';
  if (matchesAnyToolPattern(name, policy.configured.require)) return 'approvals.require';
  if (!matchesAnyToolPattern(name, policy.requested.require)) return undefined;
  if (matchesAnyToolPattern(name, policy.requested.auto_approve)) return undefined;
  return 'the run request requires approval';
}

const REDACTED = '[redacted]';

/**
 * A copy of `args` with the values of secret properties replaced: properties whose schema says `writeOnly: true`
 * or `format: "password"`, at any depth of objects and arrays the schema describes.
 */
export function redactSecretArgs(args: unknown, schema: unknown): unknown {
  if (!isRecord(schema)) return args;
  if (schema['writeOnly'] === true || schema['format'] === 'password') return REDACTED;
  if (Array.isArray(args)) {
    const items = schema['items'];
    return args.map((item) => redactSecretArgs(item, items));
  }
  if (!isRecord(args)) return args;
  const properties = isRecord(schema['properties']) ? schema['properties'] : {};
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(args))
    out[key] = key in properties ? redactSecretArgs(value, properties[key]) : value;
  return out;
}

/** One line a human reads before deciding: the tool and its arguments, shortened. */
export function approvalSummary(name: string, args: unknown, maxChars = 200): string {
  const text = `${name} ${JSON.stringify(args) ?? ''}`.trim();
  return text.length <= maxChars ? text : `${text.slice(0, maxChars - 1)}…`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
