import { createServer, connect as tcpConnect, type Server, type Socket } from 'node:net';

/** Counters of what a proxy did, for a test's assertions and figures. */
export interface FaultProxyStats {
  accepted: number;
  refused: number;
  dropped: number;
  bytesUp: number;
  bytesDown: number;
}

interface Pair {
  client: Socket;
  upstream: Socket;
}

/**
 * A TCP proxy between one actor and its NATS server that a test controls: added latency per chunk (order kept),
 * dropped connections (reset; the client reconnects), stalled connections (a black hole: bytes wait, nothing is
 * closed) and a full partition (existing connections dropped, new ones refused until it heals).
 */
export class FaultProxy {
  readonly stats: FaultProxyStats = { accepted: 0, refused: 0, dropped: 0, bytesUp: 0, bytesDown: 0 };
  private readonly pairs = new Set<Pair>();
  private latencyMs = 0;
  private partitionedUntil = 0;
  private stalled = false;
  private cutWhen: ((chunk: Buffer) => boolean) | undefined;
  private server: Server | undefined;
  port = 0;

  private constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  /** Listens on a free loopback port and forwards to `target` (`nats://host:port` or `host:port`). */
  static async start(target: string): Promise<FaultProxy> {
    const url = new URL(target.includes('://') ? target : `nats://${target}`);
    const proxy = new FaultProxy(url.hostname, Number(url.port));
    await proxy.listen();
    return proxy;
  }

  /** The URL an actor connects to. */
  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** Adds `ms` to every chunk in both directions (0 removes it). */
  setLatency(ms: number): void {
    this.latencyMs = ms;
  }

  /** Resets every open connection now; the client reconnects through the proxy. */
  dropConnections(): void {
    for (const pair of this.pairs) this.closePair(pair);
  }

  /** Holds every byte in both directions for `ms` (connections stay open), then lets them through. */
  async stall(ms: number): Promise<void> {
    this.stalled = true;
    for (const { client, upstream } of this.pairs) {
      client.pause();
      upstream.pause();
    }
    await new Promise((r) => setTimeout(r, ms));
    this.stalled = false;
    for (const { client, upstream } of this.pairs) {
      client.resume();
      upstream.resume();
    }
  }

  /** Drops every connection and refuses new ones for `ms`. Resolves when the partition heals. */
  async partition(ms: number): Promise<void> {
    this.partitionedUntil = Date.now() + ms;
    this.dropConnections();
    await new Promise((r) => setTimeout(r, ms));
  }

  /**
   * Cuts the actor off for good at the first chunk it sends that `matches`: that chunk never reaches the server,
   * every connection is dropped and new ones are refused, as if the actor died while writing it. Resolves then.
   */
  cutOnSend(matches: (chunk: Buffer) => boolean): Promise<void> {
    return new Promise((resolve) => {
      this.cutWhen = (chunk) => {
        if (!matches(chunk)) return false;
        this.cutWhen = undefined;
        this.partitionedUntil = Number.POSITIVE_INFINITY;
        this.dropConnections();
        resolve();
        return true;
      };
    });
  }

  openConnections(): number {
    return this.pairs.size;
  }

  async close(): Promise<void> {
    this.dropConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private listen(): Promise<void> {
    const server = createServer((client) => this.accept(client));
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        this.port = typeof address === 'object' && address ? address.port : 0;
        resolve();
      });
    });
  }

  private accept(client: Socket): void {
    if (Date.now() < this.partitionedUntil) {
      this.stats.refused++;
      client.destroy();
      return;
    }
    this.stats.accepted++;
    const upstream = tcpConnect(this.targetPort, this.targetHost);
    const pair: Pair = { client, upstream };
    this.pairs.add(pair);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    this.forward(client, upstream, 'bytesUp');
    this.forward(upstream, client, 'bytesDown');
    const end = () => this.closePair(pair, false);
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
    if (this.stalled) {
      client.pause();
      upstream.pause();
    }
  }

  private forward(from: Socket, to: Socket, counter: 'bytesUp' | 'bytesDown'): void {
    let lastDue = 0;
    from.on('data', (chunk: Buffer) => {
      if (counter === 'bytesUp' && this.cutWhen?.(chunk)) return;
      this.stats[counter] += chunk.length;
      if (this.latencyMs <= 0 && lastDue <= Date.now()) {
        to.write(chunk);
        return;
      }
      lastDue = Math.max(lastDue, Date.now() + this.latencyMs);
      setTimeout(() => {
        if (!to.destroyed) to.write(chunk);
      }, lastDue - Date.now());
    });
  }

  private closePair(pair: Pair, counted = true): void {
    if (!this.pairs.delete(pair)) return;
    if (counted) this.stats.dropped++;
    pair.client.destroy();
    pair.upstream.destroy();
  }
}
