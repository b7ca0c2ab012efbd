import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  CatalogListReplySchema,
  CatalogSearchReplySchema,
  ErrorCode,
  RunRequestSchema,
  encodeJson,
  requestJson,
  subjects,
  toErrorPayload,
  type Bus,
  type Logger,
  type RunEvent,
} from '@agentmesh/protocol';
import { cancelRun, submitRun } from '@agentmesh/planner';
import type { RunIndex } from './run-index.js';

/** An actor as the fleet page shows it. */
export interface FleetMember {
  name: string;
  id: string;
  version: string;
  metadata: Record<string, string>;
}

export interface ConsoleServerOptions {
  bus: Bus;
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
}

export interface ConsoleServer {
  readonly url: string;
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

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

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

/**
 * The console's HTTP server: the static web app, a JSON API over the run index, the catalog and service
 * discovery, and Server-Sent Events for live runs (`Last-Event-ID` resumes a run's stream after its last seq).
 */
export async function startConsoleServer(options: ConsoleServerOptions): Promise<ConsoleServer> {
  const { bus, prefix, index, logger } = options;
  const staticDir = options.staticDir ?? DEFAULT_STATIC;
  const s = subjects(prefix);
  const sockets = new Set<ServerResponse>();

  async function serveStatic(res: ServerResponse, path: string): Promise<void> {
    const file = normalize(join(staticDir, path === '/' ? 'index.html' : path));
    if (!file.startsWith(normalize(staticDir + sep)) && file !== normalize(staticDir))
      throw new HttpError(404, 'not found');
    const body = await readFile(file).catch(() => undefined);
    if (body === undefined) {
      if (extname(path) === '') return serveStatic(res, '/');
      throw new HttpError(404, `not found: ${path}`);
    }
    res.writeHead(200, { 'content-type': MIME[extname(file)] ?? 'application/octet-stream' });
    res.end(body);
  }

  function streamRuns(req: IncomingMessage, res: ServerResponse): void {
    const send = openSse(req, res);
    sockets.add(res);
    for (const summary of index.list().reverse()) send(undefined, 'run', summary);
    const off = index.onUpdate((summary) => send(undefined, 'run', summary));
    req.on('close', () => {
      off();
      sockets.delete(res);
    });
  }

  async function streamRun(
    req: IncomingMessage,
    res: ServerResponse,
    runId: string,
    url: URL,
  ): Promise<void> {
    const lastHeader = req.headers['last-event-id'];
    const after =
      Number(
        (typeof lastHeader === 'string' ? lastHeader : undefined) ?? url.searchParams.get('after') ?? 0,
      ) || 0;
    const send = openSse(req, res);
    sockets.add(res);
    let sent = after;
    const emit = (event: RunEvent) => {
      if (event.run_id !== runId || event.seq <= sent) return;
      sent = event.seq;
      send(event.seq, 'run-event', event);
    };
    const off = index.onUpdate((_summary, event) => {
      if (event) emit(event);
    });
    req.on('close', () => {
      off();
      sockets.delete(res);
    });
    const run = await index.get(runId);
    for (const event of run?.events ?? []) emit(event);
  }

  async function api(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const parts = url.pathname.split('/').filter(Boolean).slice(1).map(decodeURIComponent);
    const [resource, id, action] = parts;
    const q = (k: string) => url.searchParams.get(k) || undefined;
    if (resource === 'runs' && id === undefined && req.method === 'GET')
      return sendJson(res, 200, {
        runs: index.list({ status: q('status'), tenant: q('tenant'), session: q('session'), q: q('q') }),
      });
    if (resource === 'runs' && id === undefined && req.method === 'POST') {
      const body = await readBody(req);
      if (body === null || typeof body !== 'object' || Array.isArray(body))
        throw new HttpError(400, 'invalid run request: the body must be a JSON object');
      const request = body as Record<string, unknown>;
      if (
        options.defaultScript !== undefined &&
        request['provider'] === undefined &&
        request['script'] === undefined
      )
        request['script'] = options.defaultScript;
      const parsed = RunRequestSchema.safeParse(request);
      if (!parsed.success)
        throw new HttpError(
          400,
          `invalid run request: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; ')}`,
        );
      const submitted = await submitRun(bus, parsed.data, { prefix });
      return sendJson(res, 202, submitted);
    }
    if (resource === 'runs' && id !== undefined && action === undefined && req.method === 'GET') {
      const run = await index.get(id);
      if (run === undefined) throw new HttpError(404, `no run "${id}" is known`);
      return sendJson(res, 200, run);
    }
    if (resource === 'runs' && id !== undefined && action === 'events') return streamRun(req, res, id, url);
    if (resource === 'runs' && id !== undefined && action === 'cancel' && req.method === 'POST') {
      const reason = 'cancelled from the console';
      if (bus.kind === 'nats') {
        const record = await cancelRun(bus, id, { prefix, reason });
        if (record === null) throw new HttpError(404, `no run "${id}" is known`);
        return sendJson(res, 200, { run_id: id, cancelled: record.state !== 'finished' });
      }
      bus.publish(s.runCancel(id), encodeJson({ reason }));
      return sendJson(res, 200, { run_id: id, cancelled: true });
    }
    if (resource === 'stream' && req.method === 'GET') return streamRuns(req, res);
    if (resource === 'tools' && req.method === 'GET') {
      const list = await requestJson(bus, s.catalogList, {}, CatalogListReplySchema, { timeoutMs: 3000 });
      const query = q('q');
      if (query === undefined) return sendJson(res, 200, { tools: list.tools });
      const found = await requestJson(
        bus,
        s.catalogSearch,
        { query, strategy: q('strategy') ?? 'bm25', limit: 20, deferred_only: false },
        CatalogSearchReplySchema,
        { timeoutMs: 3000 },
      );
      const byName = new Map(list.tools.map((t) => [t.name, t]));
      return sendJson(res, 200, {
        tools: found.results.flatMap((r) => {
          const tool = byName.get(r.name);
          return tool ? [{ ...tool, score: r.score }] : [];
        }),
      });
    }
    if (resource === 'fleet' && req.method === 'GET')
      return sendJson(res, 200, {
        actors: (await options.fleet()).map((actor) => ({ ...actor, load: index.loadOf(actor) })),
      });
    throw new HttpError(404, `no API ${req.method} ${url.pathname}`);
  }

  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://console');
    const handled = url.pathname.startsWith('/api/')
      ? api(req, res, url)
      : req.method === 'GET'
        ? serveStatic(res, url.pathname)
        : Promise.reject(new HttpError(405, 'method not allowed'));
    handled.catch((error: unknown) => {
      if (res.headersSent) return res.end();
      if (error instanceof HttpError)
        return sendJson(res, error.status, { error: { code: 'http', message: error.message } });
      const payload = toErrorPayload(error);
      const status =
        payload.code === ErrorCode.InvalidRequest ? 400 : payload.code === ErrorCode.NoResponders ? 503 : 500;
      logger.warn({ err: payload.message, path: url.pathname }, 'console request failed');
      sendJson(res, status, { error: payload });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '127.0.0.1', resolve);
  });
  const address = server.address() as AddressInfo;
  return {
    url: `http://${address.address.includes(':') ? `[${address.address}]` : address.address}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.end();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
