import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface MetricsSource {
  scrape(): Promise<string>;
  readonly contentType: string;
}

export interface MetricsServer {
  readonly port: number;
  close(): Promise<void>;
}

/** Serves `GET /metrics` (Prometheus text) from `source` on `port` (0 picks a free one). */
export async function startMetricsServer(
  source: MetricsSource,
  options: { port: number; host?: string },
): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' || path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try GET /metrics\n');
      return;
    }
    source.scrape().then(
      (text) => res.writeHead(200, { 'content-type': source.contentType }).end(text),
      (error: unknown) =>
        res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${String(error)}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, resolve);
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
