import type { RunEvent, RunRequest, RunStatus } from '@agentmesh/protocol';
import type { ChatMessage } from './chat.js';

/** A finished (or failed) run as stored: the conversation the model saw and every event, in order. */
export interface RunTranscript {
  /** The record's format (absent: 1); set when it is saved. */
  schema_version?: number | undefined;
  version: 1;
  run_id: string;
  planner_id: string;
  request: RunRequest | unknown;
  provider?: string | undefined;
  model?: string | undefined;
  system?: string | undefined;
  status?: RunStatus | undefined;
  reason?: string | undefined;
  started_at: string;
  ended_at: string;
  messages: ChatMessage[];
  events: RunEvent[];
}
