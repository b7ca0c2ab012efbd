export * from './errors.js';
export * from './safe-regex.js';
export * from './names.js';
export * from './glob-match.js';
export * from './subjects.js';
export * from './schemas.js';
export * from './envelope.js';
export * from './codec.js';
export {
  OUTPUT_SCHEMA_MAX_BYTES,
  OUTPUT_SCHEMA_MAX_DEPTH,
  OUTPUT_SCHEMA_REFUSED_KEYWORDS,
  OutputSchemaSchema,
  outputSchemaRefusal,
  prepareOutputSchema,
  type OutputSchemaRefusal,
  type PreparedOutputSchema,
} from './output-schema.js';
export {
  OUTPUT_SCHEMA_MAX_STEPS,
  OUTPUT_VALIDATOR_CACHE_BYTES,
  OUTPUT_VALIDATOR_CACHE_SIZE,
  compileOutputSchema,
  type OutputValidator,
} from './output-validator.js';
export * from './rpc.js';
export * from './tenant-api.js';
export * from './logger.js';
export * from './jetstream.js';
export type * from './bus/types.js';
export { MemoryBus, type MemoryBusOptions } from './bus/memory-bus.js';
export { NatsBus, inboxPrefixFor, type NatsBusOptions } from './bus/nats-bus.js';
export {
  SERIALIZED_CAS_SERVER_VERSION,
  clusteredCasWarning,
  type ServerIdentity,
} from './bus/server-version.js';
export { subjectMatches } from './bus/shared.js';
export {
  KEY_READS_IN_FLIGHT,
  MemoryKvStore,
  readEntries,
  type KvBucketOptions,
  type KvEntry,
  type KvStore,
  type KvWatcher,
  type KvWatchOptions,
} from './stores/kv.js';
export { MemoryBlobStore, type BlobBucketOptions, type BlobInfo, type BlobStore } from './stores/blobs.js';
export {
  connectBus,
  connectBackend,
  memoryBackend,
  parseServers,
  credentialsInUrls,
  type ConnectBusOptions,
  type ConnectBackendOptions,
} from './connect.js';
export type * from './backend/types.js';
export { EVENT_SEQ_HEADER } from './backend/nats-event-log.js';
export { natsFailure } from './backend/nats-assets.js';
export * from './tool-client.js';
export { handOverOutcome } from './tool-handover.js';
export { generateJsonSchemas } from './json-schemas.js';
export * from './exposure.js';
export { sleep } from './timing.js';
export * from './retry.js';
export * from './control-request.js';
export { KeyedSerializer, mapLimited } from './concurrency.js';
export { SlotTable } from './slot-table.js';
export { Deadlines, type Deadline } from './deadlines.js';
export * from './telemetry/index.js';
export { tokenize, stem } from './search/tokenize.js';
export { Bm25Index, type Bm25Document, type Bm25Hit } from './search/bm25.js';
