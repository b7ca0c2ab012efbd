import { createServer, type Server } from 'node:http';

export interface HealthServer {
  setReady(ready: boolean): void;
  close(): Promise<void>;
}

/**
 * Serves `GET /healthz` (the process is alive) and `GET /readyz` (connected and serving) for container
 * orchestrators. Readiness also follows the bus connection state.
 */
export async function startHealthServer(port: number): Promise<HealthServer> {
  let ready = false;
  const server: Server = createServer((req, res) => {
    if (req.url === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else if (req.url === '/readyz') {
      res
        .writeHead(ready ? 200 : 503, { 'content-type': 'text/plain' })
        .end(ready ? 'ready\n' : 'not ready\n');
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, resolve);
  });
  return {
    setReady: (r) => {
      ready = r;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
