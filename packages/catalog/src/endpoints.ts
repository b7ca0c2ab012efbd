import {
  CatalogAvailabilitySchema,
  CatalogDeregisterSchema,
  CatalogGetSchema,
  CatalogHeartbeatSchema,
  CatalogListSchema,
  serve,
  type Backend,
  type BusMessage,
  type CatalogAvailability,
  type Logger,
  type SearchStrategy,
  type Subscription,
  type subjects,
} from '@agentmesh/protocol';
import { z } from 'zod';
import type { WorkerLiveness } from './liveness.js';
import { CatalogQueries, SearchRequestSchema } from './queries.js';
import { checkRegister, type Registrar } from './registration.js';
import type { RegistrationPolicy } from './role-policy.js';
import { traceCatalogSearch } from './search-span.js';

/** Queue group every catalog replica joins, so each request is answered once. */
export const CATALOG_QUEUE = 'agentmesh-catalog';

/** Register bodies reach the handler unchecked; it runs {@link checkRegister}. */
const UncheckedSchema = z.unknown();

/** What the catalog's subjects are served with. */
export interface CatalogEndpoints {
  bus: Backend;
  subjects: ReturnType<typeof subjects>;
  logger: Logger;
  /** Largest list, get, search, heartbeat or deregister request. */
  maxRequestBytes: number;
  /** Largest register request or availability notice. */
  maxRegisterBytes: number;
  policy: RegistrationPolicy;
  registrar: Registrar;
  liveness: WorkerLiveness;
  queries: CatalogQueries;
  defaultStrategy: SearchStrategy;
  /** Applies a worker's availability notice. */
  setAvailability: (notice: CatalogAvailability) => { ok: true };
}

/** Answers every catalog subject: the worker side (register, heartbeat, deregister, availability), then the readers. */
export function serveCatalog(e: CatalogEndpoints): Subscription[] {
  return [...serveWorkerSide(e), ...serveReaders(e)];
}

function serveWorkerSide(e: CatalogEndpoints): Subscription[] {
  const s = e.subjects;
  const common = { bus: e.bus, queue: CATALOG_QUEUE, logger: e.logger };
  const small = { ...common, maxBytes: e.maxRequestBytes };
  const register = (subject: string, roleOf: (msg: BusMessage) => string | undefined) =>
    serve({
      ...common,
      maxBytes: e.maxRegisterBytes,
      subject,
      schema: UncheckedSchema,
      what: 'catalog register request',
      handler: (body, msg) => {
        const role = roleOf(msg);
        const namespaces = e.policy.namespacesOf(role, s.catalogRegister);
        return e.registrar.register(checkRegister(body, 'catalog register request'), role, namespaces);
      },
    });
  const roleAt = s.catalogRegister.length + 1;
  return [
    register(s.catalogRegister, () => undefined),
    register(s.allCatalogRegisterRoles, (msg) => msg.subject.slice(roleAt)),
    serve({
      ...small,
      subject: s.catalogDeregister,
      schema: CatalogDeregisterSchema,
      what: 'catalog deregister request',
      handler: (body) => e.liveness.deregister(body.worker_id),
    }),
    serve({
      ...small,
      subject: s.catalogHeartbeat,
      schema: CatalogHeartbeatSchema,
      what: 'catalog heartbeat',
      handler: (body) => e.liveness.heartbeat(body.worker_id),
    }),
    // every replica hears availability notices (no queue group)
    serve({
      bus: e.bus,
      logger: e.logger,
      maxBytes: e.maxRegisterBytes,
      subject: s.catalogAvailability,
      schema: CatalogAvailabilitySchema,
      what: 'catalog availability notice',
      handler: e.setAvailability,
    }),
  ];
}

function serveReaders(e: CatalogEndpoints): Subscription[] {
  const s = e.subjects;
  const small = { bus: e.bus, queue: CATALOG_QUEUE, logger: e.logger, maxBytes: e.maxRequestBytes };
  return [
    serve({
      ...small,
      subject: s.catalogList,
      schema: CatalogListSchema,
      what: 'catalog list request',
      handler: (body) => e.queries.list(body),
    }),
    serve({
      ...small,
      subject: s.catalogGet,
      schema: CatalogGetSchema,
      what: 'catalog get request',
      handler: (body) => e.queries.get(body),
    }),
    serve({
      ...small,
      subject: s.catalogSearch,
      schema: SearchRequestSchema,
      what: 'catalog search request',
      handler: (body, msg) =>
        traceCatalogSearch(
          msg.headers,
          { query: body.query, strategy: body.strategy ?? e.defaultStrategy },
          () => e.queries.search(body),
        ),
    }),
  ];
}
