export {
  RunLease,
  leaseLostError,
  parseRecord,
  DEFAULT_LEASE_MS,
  DEFAULT_CHECKPOINT_TTL_MS,
  type DurabilityOptions,
  type LeaseClaim,
  type LeaseHolder,
} from './lease.js';
export { CheckpointWriter, readCheckpoint, type StoredCheckpoint } from './checkpoint.js';
export { runRecord } from './records.js';
export {
  checkpointsBucket,
  openCheckpoints,
  readRunEvents,
  lastStoredEvent,
  plannerInfra,
  type PlannerInfra,
  type EventPublisher,
  type IntakeDelivery,
  type Settlement,
} from './infra.js';
