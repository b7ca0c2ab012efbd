import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ErrorCode, type Backend, type Logger } from '@agentmesh/protocol';
import { applyCors, GatewayAuth } from './auth.js';
import { GatewayHandlers, type HandlerDeps } from './handlers.js';
import { HttpError, sendError } from './http.js';
import { matchRoute } from './routes.js';
import type { RunSource } from './source.js';

export interface GatewayOptions {
  bus: Backend;
  prefix: string;
  source: RunSource;
  logger: Logger;
  /** API key -> tenant; empty means open access as tenant `default`. */
  keys: ReadonlyMap<string, string>;
  corsOrigins?: readonly string[] | undefined;
  port: number;
  host?: string | undefined;
  acceptTimeoutMs?: number | undefined;
  keepAliveMs?: number | undefined;
  /** Model turns for runs that name neither a provider nor a script. */
  defaultScript?: unknown;
}

export interface Gateway {
  /** e.g. `http://127.0.0.1:8080` */
  readonly url: string;
  readonly open: boolean;
  close(): Promise<void>;
}

/** The request's tenant; a 401 also says `WWW-Authenticate: Bearer`. */
function authenticate(req: IncomingMessage, res: ServerResponse, auth: GatewayAuth): string {
  try {
    return auth.tenantOf(req);
  } catch (error) {
    res.setHeader('www-authenticate', 'Bearer realm="agentmesh"');
    throw error;
  }
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  deps: { handlers: GatewayHandlers; auth: GatewayAuth; corsOrigins: readonly string[] },
): Promise<void> {
  if (applyCors(req, res, deps.corsOrigins)) return;
  const match = matchRoute(req.method ?? 'GET', url.pathname);
  if (match === undefined) throw new HttpError(404, `no route ${url.pathname}`, ErrorCode.NotFound);
  if ('methods' in match) {
    res.setHeader('allow', match.methods.join(', '));
    throw new HttpError(
      405,
      `${url.pathname} takes ${match.methods.join(', ')}, not ${req.method}`,
      ErrorCode.InvalidRequest,
    );
  }
  const tenant = match.route.auth ? authenticate(req, res, deps.auth) : 'default';
  await match.route.handle(deps.handlers, { req, res, url, params: match.params, tenant });
}

/**
 * The HTTP gateway: runs, their resumable event streams in three formats, run controls, the catalog, OpenAPI and
 * health, for the tenant of each request's API key. Holds no state of its own beyond caches.
 */
export async function startGateway(options: GatewayOptions): Promise<Gateway> {
  const deps: HandlerDeps = {
    bus: options.bus,
    prefix: options.prefix,
    source: options.source,
    logger: options.logger,
    acceptTimeoutMs: options.acceptTimeoutMs,
    keepAliveMs: options.keepAliveMs,
    defaultScript: options.defaultScript,
  };
  const context = {
    handlers: new GatewayHandlers(deps),
    auth: new GatewayAuth(options.keys),
    corsOrigins: options.corsOrigins ?? [],
  };
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://gateway');
    handle(req, res, url, context).catch((error: unknown) =>
      sendError(res, error, options.logger, url.pathname),
    );
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, host, resolve);
  });
  const address = server.address() as AddressInfo;
  const shown = ['0.0.0.0', '::'].includes(address.address) ? '127.0.0.1' : address.address;
  return {
    url: `http://${shown.includes(':') ? `[${shown}]` : shown}:${address.port}`,
    open: context.auth.open,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
