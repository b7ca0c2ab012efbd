import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ApprovalDecisionSchema,
  CatalogListReplySchema,
  CatalogSearchReplySchema,
  ErrorCode,
  RunRequestSchema,
  describeZodError,
  encodeJson,
  newRequestId,
  requestJson,
  subjects,
  toErrorPayload,
  type Backend,
  type Logger,
  type RunEvent,
} from '@agentmesh/protocol';
import { cancelRun, cancelTookEffect, sendApprovalDecision, submitRun } from '@agentmesh/planner';
import { accessToken, allowedHosts } from '../http-access.js';
import { acceptTokenLink, checkAccess, HttpError, type ConsoleAccess } from './guard.js';
import type { RunIndex } from './run-index.js';
import { forkFromConsole } from './fork.js';

/** An actor as the fleet page shows it. */
export interface FleetMember {
  name: string;
  id: string;
  version: string;
  metadata: Record<string, string>;
}

export interface ConsoleServerOptions {
  bus: Backend;
  prefix: string;
  index: RunIndex;
  logger: Logger;
  /** The actors to list on the fleet page (service discovery on NATS). */
  fleet: () => Promise<FleetMember[]>;
  port: number;
  host?: string;
  /** Model turns for submitted runs that name neither a provider nor a script (scripted demos and tests). */
  defaultScript?: unknown;
  /** Folder of the web app's static files (default: packages/cli/console). */
  staticDir?: string;
  /** The API's access token (default: 256 random bits, new at each start). */
  token?: string;
}

export interface ConsoleServer {
  /** The console's origin, e.g. `http://127.0.0.1:7070`. */
  readonly url: string;
  /** The token every `/api` request presents (as `Authorization: Bearer`, or the cookie the link sets). */
  readonly token: string;
  /** The URL to open: it hands the token to the browser, which keeps it in a same-site cookie. */
  readonly link: string;
  close(): Promise<void>;
}

const DEFAULT_STATIC = fileURLToPath(new URL('../../console/', import.meta.url));
const MIME: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};
const MAX_BODY = 1 << 20;
const ERROR_STATUS: Record<string, number> = {
  [ErrorCode.InvalidRequest]: 400,
  [ErrorCode.NotFound]: 404,
  already_decided: 409,
  run_finished: 409,
  [ErrorCode.NoResponders]: 503,
};
const WILDCARDS = new Set(['0.0.0.0', '::']);

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY) throw new HttpError(413, 'request body above 1 MiB');
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (error) {
    throw new HttpError(400, `request body is not JSON: ${(error as Error).message}`);
  }
}

function openSse(
  req: IncomingMessage,
  res: ServerResponse,
): (id: number | undefined, event: string, data: unknown) => void {
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-store',
    connection: 'keep-alive',
  });
  res.write('retry: 1000\n\n');
  const ping = setInterval(() => res.write(': ping\n\n'), 15_000);
  req.on('close', () => clearInterval(ping));
  return (id, event, data) => {
    res.write(`${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  };
}

type Route = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<void> | void;

/** The console's routes: static files, the JSON API and the SSE streams. */
class ConsoleRoutes {
  readonly sockets = new Set<ServerResponse>();
  private readonly subjects: ReturnType<typeof subjects>;
  private readonly staticDir: string;

  constructor(
    private readonly options: ConsoleServerOptions,
    private readonly access: ConsoleAccess,
  ) {
    this.subjects = subjects(options.prefix);
    this.staticDir = options.staticDir ?? DEFAULT_STATIC;
  }

  handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    if (!url.pathname.startsWith('/api/')) {
      if (req.method !== 'GET') return Promise.reject(new HttpError(405, 'method not allowed'));
      return acceptTokenLink(res, url, this.access) ? Promise.resolve() : this.serveStatic(res, url.pathname);
    }
    const [resource, id, action, item] = url.pathname
      .split('/')
      .filter(Boolean)
      .slice(1)
      .map(decodeURIComponent);
    const route = this.route(req.method ?? 'GET', resource, id, action, item);
    if (route === undefined) throw new HttpError(404, `no API ${req.method} ${url.pathname}`);
    return Promise.resolve(route(req, res, url));
  }

  private route(
    method: string,
    resource?: string,
    id?: string,
    action?: string,
    item?: string,
  ): Route | undefined {
    if (resource === 'runs' && id === undefined)
      return method === 'GET'
        ? (_q, res, url) => this.listRuns(res, url)
        : (req, res) => this.submit(req, res);
    if (resource === 'runs' && id !== undefined) {
      if (action === undefined && method === 'GET') return (_q, res) => this.showRun(res, id);
      if (action === 'events') return (req, res, url) => this.streamRun(req, res, id, url);
      if (action === 'cancel' && method === 'POST') return (_q, res) => this.cancel(res, id);
      if (action === 'fork' && method === 'POST')
        return async (req, res) =>
          sendJson(
            res,
            202,
            await forkFromConsole(this.options.bus, this.options.prefix, id, await readBody(req)),
          );
      if (action === 'approvals' && item !== undefined && method === 'POST')
        return (req, res) => this.decide(req, res, id, item);
    }
    if (resource === 'stream' && method === 'GET') return (req, res) => this.streamRuns(req, res);
    if (resource === 'tools' && method === 'GET') return (_q, res, url) => this.tools(res, url);
    if (resource === 'fleet' && method === 'GET') return (_q, res) => this.fleet(res);
    return undefined;
  }

  private async serveStatic(res: ServerResponse, path: string): Promise<void> {
    const root = normalize(this.staticDir + sep);
    const file = normalize(join(this.staticDir, path === '/' ? 'index.html' : path));
    if (!file.startsWith(root)) throw new HttpError(404, 'not found');
    const body = await readFile(file).catch(() => undefined);
    if (body === undefined) {
      if (extname(path) === '') return this.serveStatic(res, '/');
      throw new HttpError(404, `not found: ${path}`);
    }
    res.writeHead(200, { 'content-type': MIME[extname(file)] ?? 'application/octet-stream' });
    res.end(body);
  }

  private listRuns(res: ServerResponse, url: URL): void {
    const q = (k: string) => url.searchParams.get(k) || undefined;
    sendJson(res, 200, {
      runs: this.options.index.list({
        status: q('status'),
        tenant: q('tenant'),
        session: q('session'),
        q: q('q'),
      }),
    });
  }

  private async submit(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    if (body === null || typeof body !== 'object' || Array.isArray(body))
      throw new HttpError(400, 'invalid run request: the body must be a JSON object');
    const request = body as Record<string, unknown>;
    const { defaultScript } = this.options;
    if (defaultScript !== undefined && request['provider'] === undefined && request['script'] === undefined)
      request['script'] = defaultScript;
    const parsed = RunRequestSchema.safeParse(request);
    if (!parsed.success)
      throw new HttpError(
        400,
        `invalid run request: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; ')}`,
      );
    sendJson(res, 202, await submitRun(this.options.bus, parsed.data, { prefix: this.options.prefix }));
  }

  private async showRun(res: ServerResponse, runId: string): Promise<void> {
    const run = await this.options.index.get(runId);
    if (run === undefined) throw new HttpError(404, `no run "${runId}" is known`);
    sendJson(res, 200, run);
  }

  private async cancel(res: ServerResponse, runId: string): Promise<void> {
    const { bus, prefix } = this.options;
    const reason = 'cancelled from the console';
    if (bus.kind === 'nats') {
      const record = await cancelRun(bus, runId, { prefix, reason, requestId: newRequestId() });
      if (record === null) throw new HttpError(404, `no run "${runId}" is known`);
      return sendJson(res, 200, { run_id: runId, cancelled: cancelTookEffect(record) });
    }
    bus.publish(this.subjects.runCancel(runId), encodeJson({ reason }));
    sendJson(res, 200, { run_id: runId, cancelled: true });
  }

  /**
   * Approves or denies a call the run waits on: the body is `{ "decision": "approve" | "deny", "reason"?,
   * "request_id"? }`; the decision is sent again on no answer, and a repeat of a `request_id` is `duplicate: true`.
   */
  private async decide(
    req: IncomingMessage,
    res: ServerResponse,
    runId: string,
    approvalId: string,
  ): Promise<void> {
    const body = await readBody(req);
    const parsed = ApprovalDecisionSchema.safeParse({
      ...(body !== null && typeof body === 'object' ? body : {}),
      approval_id: approvalId,
      by: 'console',
    });
    if (!parsed.success) throw new HttpError(400, `invalid decision: ${describeZodError(parsed.error)}`);
    const sent = await sendApprovalDecision(this.options.bus, runId, parsed.data, {
      prefix: this.options.prefix,
    });
    sendJson(res, 200, {
      run_id: runId,
      approval_id: approvalId,
      decision: parsed.data.decision,
      request_id: sent.request_id,
      ...(sent.duplicate === true ? { duplicate: true } : {}),
    });
  }

  private async tools(res: ServerResponse, url: URL): Promise<void> {
    const { bus } = this.options;
    const list = await requestJson(bus, this.subjects.catalogList, {}, CatalogListReplySchema, {
      timeoutMs: 3000,
    });
    const query = url.searchParams.get('q') || undefined;
    if (query === undefined) return sendJson(res, 200, { tools: list.tools });
    const strategy = url.searchParams.get('strategy') || 'bm25';
    const found = await requestJson(
      bus,
      this.subjects.catalogSearch,
      { query, strategy, limit: 20, deferred_only: false },
      CatalogSearchReplySchema,
      { timeoutMs: 3000 },
    );
    const byName = new Map(list.tools.map((t) => [t.name, t]));
    sendJson(res, 200, {
      tools: found.results.flatMap((r) => {
        const tool = byName.get(r.name);
        return tool ? [{ ...tool, score: r.score }] : [];
      }),
    });
  }

  private async fleet(res: ServerResponse): Promise<void> {
    const actors = await this.options.fleet();
    sendJson(res, 200, {
      actors: actors.map((actor) => ({ ...actor, load: this.options.index.loadOf(actor) })),
    });
  }

  private streamRuns(req: IncomingMessage, res: ServerResponse): void {
    const { index } = this.options;
    const send = this.openStream(req, res);
    for (const summary of index.list().reverse()) send(undefined, 'run', summary);
    const off = index.onUpdate((summary) => send(undefined, 'run', summary));
    req.on('close', off);
  }

  /** A run's events after `Last-Event-ID` (or `?after=`): the stored ones first, then live, each once, in order. */
  private async streamRun(req: IncomingMessage, res: ServerResponse, runId: string, url: URL): Promise<void> {
    const { index } = this.options;
    const lastHeader = req.headers['last-event-id'];
    let sent =
      Number(
        (typeof lastHeader === 'string' ? lastHeader : undefined) ?? url.searchParams.get('after') ?? 0,
      ) || 0;
    const send = this.openStream(req, res);
    const emit = (event: RunEvent) => {
      if (event.run_id !== runId || event.seq <= sent) return;
      sent = event.seq;
      send(event.seq, 'run-event', event);
    };
    const off = index.onUpdate((_summary, event) => {
      if (event) emit(event);
    });
    req.on('close', off);
    const run = await index.get(runId);
    for (const event of run?.events ?? []) emit(event);
  }

  private openStream(req: IncomingMessage, res: ServerResponse): ReturnType<typeof openSse> {
    this.sockets.add(res);
    req.on('close', () => this.sockets.delete(res));
    return openSse(req, res);
  }
}

function errorReply(error: unknown, res: ServerResponse, url: URL, logger: Logger): void {
  if (res.headersSent) return void res.end();
  if (error instanceof HttpError)
    return sendJson(res, error.status, { error: { code: error.code, message: error.message } });
  const payload = toErrorPayload(error);
  const status = ERROR_STATUS[payload.code] ?? 500;
  logger.warn({ err: payload.message, path: url.pathname }, 'console request failed');
  sendJson(res, status, { error: payload });
}

/**
 * The console's HTTP server: the static web app, a JSON API over the run index, the catalog and service
 * discovery, and Server-Sent Events for live runs (`Last-Event-ID` resumes a run's stream after its last seq).
 * Every request must name the console's own address in `Host` and, when it has an `Origin`, come from the
 * console's own page; the API also needs the per-launch token, and state changes a JSON body.
 */
export async function startConsoleServer(options: ConsoleServerOptions): Promise<ConsoleServer> {
  const { token } = accessToken(options.token, 'the console token');
  const access: ConsoleAccess = { hosts: [], token, cookie: '' };
  const routes = new ConsoleRoutes(options, access);
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://console');
    Promise.resolve()
      .then(() => {
        checkAccess(req, url, access);
        return routes.handle(req, res, url);
      })
      .catch((error: unknown) => errorReply(error, res, url, options.logger));
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, host, resolve);
  });
  const address = server.address() as AddressInfo;
  Object.assign(access, {
    hosts: allowedHosts(host, address.port),
    cookie: `agentmesh_console_${address.port}`,
  });
  const shown = WILDCARDS.has(address.address) ? '127.0.0.1' : address.address;
  const url = `http://${shown.includes(':') ? `[${shown}]` : shown}:${address.port}`;
  return {
    url,
    token,
    link: `${url}/?token=${token}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of routes.sockets) socket.end();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
