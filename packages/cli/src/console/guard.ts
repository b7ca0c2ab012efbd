import type { IncomingMessage, ServerResponse } from 'node:http';
import { ErrorCode } from '@agentmesh/protocol';
import { bearerToken, hostAllowed, tokenMatches } from '../http-access.js';

/** An HTTP answer with a status, a code (an `ErrorCode` or `http`) and a message naming the problem. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: string = 'http',
  ) {
    super(message);
  }
}

/** Who may use the console: the `Host` values it answers to, and the per-launch token its API asks for. */
export interface ConsoleAccess {
  hosts: readonly string[];
  token: string;
  /** The name of the cookie that carries the token (one per port, so two consoles do not overwrite each other). */
  cookie: string;
}

const SAFE_METHODS = new Set(['GET', 'HEAD']);

function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return value.join('=');
  }
  return undefined;
}

function checkOrigin(req: IncomingMessage, access: ConsoleAccess): void {
  const origin = req.headers.origin;
  if (origin === undefined) return;
  const own = access.hosts.flatMap((h) => [
    `http://${h}`,
    ...(h.endsWith(':80') ? [`http://${h.slice(0, -3)}`] : []),
  ]);
  if (!own.includes(origin.toLowerCase()))
    throw new HttpError(
      403,
      `Origin "${origin}" is not the console's own (${own[0]}): requests from other web pages are refused`,
      ErrorCode.PermissionDenied,
    );
}

function checkToken(req: IncomingMessage, access: ConsoleAccess): void {
  const presented = bearerToken(req.headers.authorization) ?? cookieValue(req.headers.cookie, access.cookie);
  if (tokenMatches(presented, access.token)) return;
  throw new HttpError(
    401,
    presented === undefined
      ? 'the console API needs its access token: open the URL the console printed at start (…/?token=…), ' +
          'or send "Authorization: Bearer <token>"'
      : "the access token is not this console's (a new one is made at each start): open the URL it printed",
    ErrorCode.PermissionDenied,
  );
}

function checkJson(req: IncomingMessage): void {
  if (SAFE_METHODS.has(req.method ?? 'GET')) return;
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json')
    throw new HttpError(
      415,
      `${req.method} needs "Content-Type: application/json", got ${type === '' ? 'none' : `"${type}"`}`,
      ErrorCode.InvalidRequest,
    );
}

/**
 * Refuses what a web page on another origin could send: a `Host` that is not the console's address (DNS
 * rebinding), a foreign `Origin`, an API call without the token, a state change that is not JSON.
 */
export function checkAccess(req: IncomingMessage, url: URL, access: ConsoleAccess): void {
  if (!hostAllowed(req.headers.host, access.hosts))
    throw new HttpError(
      421,
      `Host "${req.headers.host ?? ''}" is not this console's address (${access.hosts.join(', ')}): refused, ` +
        'as a page reaching the console under another name would be (DNS rebinding)',
      ErrorCode.PermissionDenied,
    );
  checkOrigin(req, access);
  if (!url.pathname.startsWith('/api/')) return;
  checkToken(req, access);
  checkJson(req);
}

/**
 * `GET /?token=T` (the URL printed at start): keeps the token in a `SameSite=Strict`, `HttpOnly` cookie and
 * redirects to the same page without it. Returns false when the URL carries no token.
 */
export function acceptTokenLink(res: ServerResponse, url: URL, access: ConsoleAccess): boolean {
  const given = url.searchParams.get('token');
  if (given === null) return false;
  if (!tokenMatches(given, access.token))
    throw new HttpError(
      401,
      "the token in this link is not this console's (a new one is made at each start): open the URL it printed",
      ErrorCode.PermissionDenied,
    );
  url.searchParams.delete('token');
  res.writeHead(303, {
    location: `${url.pathname}${url.search}`,
    'set-cookie': `${access.cookie}=${access.token}; HttpOnly; SameSite=Strict; Path=/`,
    'cache-control': 'no-store',
  });
  res.end();
  return true;
}
