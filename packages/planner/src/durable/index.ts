export {
  RunLease,
  leaseLostError,
  DEFAULT_LEASE_MS,
  DEFAULT_CHECKPOINT_TTL_MS,
  type DurabilityOptions,
  type LeaseClaim,
  type LeaseHolder,
} from './lease.js';
export { CheckpointWriter, readCheckpoint, type StoredCheckpoint } from './checkpoint.js';
export { parseRecord, runRecord } from '../model/record.js';
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
} from '../infra/backend.js';
