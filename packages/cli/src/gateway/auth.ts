import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseYaml } from '../yaml.js';
import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';
import { bearerToken, MIN_TOKEN_LENGTH } from '../http-access.js';
import { HttpError } from './http.js';

/** The tenant of requests when no API key is configured (open access). */
export const OPEN_TENANT = 'default';

/** Where the gateway's keys come from: the config's `gateway:` section and the environment. */
export interface GatewayKeySources {
  /** `gateway.api_keys` inline in the configuration. */
  inline?: Record<string, string> | undefined;
  /** `gateway.api_keys_file` or AGENTMESH_GATEWAY_KEYS_FILE: a YAML/JSON map `key: tenant`. */
  file?: string | undefined;
  /** AGENTMESH_GATEWAY_KEYS: `key=tenant` pairs separated by commas or whitespace. */
  env?: string | undefined;
}

function keysFromEnv(text: string): Record<string, string> {
  const keys: Record<string, string> = {};
  for (const pair of text.split(/[\s,]+/).filter(Boolean)) {
    const at = pair.lastIndexOf('=');
    if (at <= 0 || at === pair.length - 1)
      throw new AgentMeshError(
        ErrorCode.InvalidConfig,
        'AGENTMESH_GATEWAY_KEYS holds "key=tenant" pairs separated by commas; one entry has no "=tenant"',
      );
    keys[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return keys;
}

function keysFromFile(path: string): Record<string, string> {
  const parsed: unknown = parseYaml(readFileSync(path, 'utf8'));
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `${path}: the API key file must map each key to a tenant`,
    );
  const keys: Record<string, string> = {};
  for (const [key, tenant] of Object.entries(parsed as Record<string, unknown>)) {
    if (typeof tenant !== 'string' || tenant === '')
      throw new AgentMeshError(
        ErrorCode.InvalidConfig,
        `${path}: the tenant of a key must be a non-empty string`,
      );
    keys[key] = tenant;
  }
  return keys;
}

/** Every configured key and its tenant; a key shorter than 32 characters is refused (it names none of them). */
export function loadApiKeys(sources: GatewayKeySources): Map<string, string> {
  const all = {
    ...sources.inline,
    ...(sources.file === undefined ? {} : keysFromFile(sources.file)),
    ...(sources.env === undefined ? {} : keysFromEnv(sources.env)),
  };
  const keys = new Map<string, string>();
  for (const [key, tenant] of Object.entries(all)) {
    if (key.length < MIN_TOKEN_LENGTH)
      throw new AgentMeshError(
        ErrorCode.InvalidConfig,
        `a gateway API key (of tenant "${tenant}") is ${key.length} characters long; keys need at least ${MIN_TOKEN_LENGTH}`,
      );
    keys.set(key, tenant);
  }
  return keys;
}

const digest = (key: string) => createHash('sha256').update(key).digest('base64');

/**
 * Who a request is: the tenant of its bearer key, or `default` when the gateway is open. Keys are held by their
 * SHA-256, and a presented key is looked up by its own: one hash per request whatever the number of keys.
 */
export class GatewayAuth {
  private readonly tenants: ReadonlyMap<string, string>;

  constructor(keys: ReadonlyMap<string, string>) {
    this.tenants = new Map([...keys].map(([key, tenant]) => [digest(key), tenant]));
  }

  get open(): boolean {
    return this.tenants.size === 0;
  }

  /** The tenant of the request's `Authorization: Bearer <key>`; 401 `permission_denied` without a valid key. */
  tenantOf(req: IncomingMessage): string {
    if (this.open) return OPEN_TENANT;
    const presented = bearerToken(req.headers.authorization);
    const tenant = presented === undefined ? undefined : this.tenants.get(digest(presented));
    if (tenant !== undefined) return tenant;
    throw new HttpError(
      401,
      presented === undefined
        ? 'the gateway needs an API key: send "Authorization: Bearer <key>"'
        : "the API key is not one of the gateway's keys",
      ErrorCode.PermissionDenied,
    );
  }
}

const CORS_HEADERS = {
  'access-control-allow-methods': 'GET, POST, OPTIONS',
  'access-control-allow-headers': 'authorization, content-type, last-event-id, accept',
  'access-control-expose-headers': 'x-vercel-ai-ui-message-stream',
  'access-control-max-age': '600',
};

/**
 * Cross-origin requests: an `Origin` listed in `gateway.cors_origins` (or `*`) gets the CORS headers; any other
 * `Origin` is refused with 403, so a web page elsewhere cannot drive the gateway. Returns true when it answered a
 * preflight.
 */
export function applyCors(req: IncomingMessage, res: ServerResponse, origins: readonly string[]): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return false;
  if (!origins.includes('*') && !origins.includes(origin))
    throw new HttpError(
      403,
      `Origin "${origin}" is not in gateway.cors_origins: requests from other web pages are refused`,
      ErrorCode.PermissionDenied,
    );
  res.setHeader('access-control-allow-origin', origin);
  res.setHeader('vary', 'Origin');
  if (req.method !== 'OPTIONS') return false;
  res.writeHead(204, CORS_HEADERS);
  res.end();
  return true;
}
