import type { Bus } from './bus/types.js';
import { MemoryBus } from './bus/memory-bus.js';
import { NatsBus, type NatsBusOptions } from './bus/nats-bus.js';

export interface ConnectBusOptions extends NatsBusOptions {
  /** A NATS URL (or several, comma-separated); absent means the in-process bus. */
  natsUrl?: string | undefined;
}

/** NATS when a URL is given, the in-process bus otherwise. */
export async function connectBus(options: ConnectBusOptions = {}): Promise<Bus> {
  if (options.natsUrl === undefined || options.natsUrl === '') {
    return new MemoryBus(options.logger === undefined ? {} : { logger: options.logger });
  }
  return NatsBus.connect(
    options.natsUrl.split(',').map((s) => s.trim()),
    options,
  );
}
