import { randomBytes } from 'node:crypto';
import {
  actorMetrics,
  publishJson,
  type Bus,
  type Logger,
  type Subjects,
  type ToolCapacity,
} from '@agentmesh/protocol';
import type { RoomFor } from './admission.js';

/**
 * A worker's own subject for each of its tools, served without a queue group, and the capacity notices that point
 * callers it turned away at it once it has room again: a woken call goes to this worker, not back to the queue group
 * where a full replica could draw it again.
 */
export class CapacityNotices {
  /** Random per worker, so two workers never share a subject whatever their ids. */
  private readonly token = `W${randomBytes(12).toString('base64url')}`;

  constructor(
    private readonly bus: Bus,
    private readonly subjects: Subjects,
    private readonly workerId: string,
    private readonly logger: Logger,
  ) {}

  /** This worker's own subject for `tool`. */
  subjectFor(tool: string): string {
    return this.subjects.toolInvokeDirect(tool, this.token);
  }

  /** Tells the callers waiting for these tools that this worker has room now. */
  announce(room: RoomFor[] | undefined): void {
    if (room === undefined) return;
    for (const { tool, free } of room) {
      const notice: ToolCapacity = { worker_id: this.workerId, tool, invoke: this.subjectFor(tool), free };
      try {
        publishJson(this.bus, this.subjects.toolCapacity(tool), notice);
        actorMetrics().capacityNotice(tool);
      } catch (error) {
        this.logger.warn({ err: error, tool }, 'capacity notice not sent');
      }
    }
  }
}
