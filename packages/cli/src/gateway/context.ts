import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Backend, Logger } from '@agentmesh/protocol';
import type { RunSource } from './source.js';

/** One authenticated request: who asks (the tenant of its key) and the path's parameters. */
export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  params: Record<string, string>;
  tenant: string;
}

export interface HandlerDeps {
  bus: Backend;
  prefix: string;
  source: RunSource;
  logger: Logger;
  /** How long `POST /v1/runs` waits for a planner to accept the run (default 10 s). */
  acceptTimeoutMs?: number | undefined;
  keepAliveMs?: number | undefined;
  /** Model turns for runs that name neither a provider nor a script (`--script`: demos without a model). */
  defaultScript?: unknown;
}
