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

/** The NATS backend (JetStream, KV, object store) on one connection to any of `servers`. */
export function connectBackend(options: ConnectBackendOptions): Promise<Backend> {
  const { servers, ...rest } = options;
  return NatsBus.connect(Array.isArray(servers) ? servers : parseServers(servers), rest);
}

/** NATS when a URL is given, the in-process backend otherwise. */
export async function connectBus(options: ConnectBusOptions = {}): Promise<Backend> {
  const { natsUrl, ...rest } = options;
  if (natsUrl === undefined || natsUrl.trim() === '')
    return memoryBackend(options.logger === undefined ? {} : { logger: options.logger });
  return connectBackend({ ...rest, servers: natsUrl });
}
