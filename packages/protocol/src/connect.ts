import type { Logger } from 'pino';
import type { Backend } from './backend/types.js';
import { MemoryBus } from './bus/memory-bus.js';
import { NatsBus, type NatsBusOptions } from './bus/nats-bus.js';

export interface ConnectBusOptions extends NatsBusOptions {
  /** A NATS URL (or several, comma-separated); absent means the in-process bus. */
  natsUrl?: string | undefined;
}

/** The servers of a `--nats` / NATS_URL value: a comma-separated list, blanks dropped. */
export function parseServers(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** The in-process backend: every piece of state lives in the returned instance. */
export function memoryBackend(options: { logger?: Logger; maxPayload?: number } = {}): Backend {
  return new MemoryBus(options);
}

export interface ConnectBackendOptions extends NatsBusOptions {
  /** NATS servers: a list or a comma-separated string (every one a URL). */
  servers: string | string[];
}

/**
 * Credentials written into server URLs (`nats://user:pass@host`, `nats://token@host`). The NATS client applies a
 * URL's credentials only when it has one server, so for a list they become connection options: the first URL that
 * carries any wins.
 */
export function credentialsInUrls(
  servers: readonly string[],
): { user: string; pass: string } | { token: string } | undefined {
  for (const server of servers) {
    let url: URL;
    try {
      url = new URL(server.includes('://') ? server : `nats://${server}`);
    } catch {
      continue;
    }
    if (url.username === '') continue;
    const user = decodeURIComponent(url.username);
    return url.password === '' ? { token: user } : { user, pass: decodeURIComponent(url.password) };
  }
  return undefined;
}

/** The NATS backend (JetStream, KV, object store) on one connection to any of `servers`. */
export function connectBackend(options: ConnectBackendOptions): Promise<Backend> {
  const { servers, ...rest } = options;
  const list = Array.isArray(servers) ? servers : parseServers(servers);
  if (list.length < 2) return NatsBus.connect(list, rest);
  const inUrls = rest.user === undefined && rest.token === undefined ? credentialsInUrls(list) : undefined;
  return NatsBus.connect(list.map(withoutCredentials), { ...inUrls, ...rest });
}

function withoutCredentials(server: string): string {
  const at = server.lastIndexOf('@');
  if (at < 0) return server;
  const scheme = server.indexOf('://');
  return (scheme < 0 ? '' : server.slice(0, scheme + 3)) + server.slice(at + 1);
}

/** NATS when a URL is given, the in-process backend otherwise. */
export async function connectBus(options: ConnectBusOptions = {}): Promise<Backend> {
  const { natsUrl, ...rest } = options;
  if (natsUrl === undefined || natsUrl.trim() === '')
    return memoryBackend(options.logger === undefined ? {} : { logger: options.logger });
  return connectBackend({ ...rest, servers: natsUrl });
}
