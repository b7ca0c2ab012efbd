import type { RunEvent } from '@agentmesh/protocol';

/** Turns one run's events, in seq order, into the frames of a stream format (each frame one SSE `data:`). */
export interface Translator {
  /** The frames for one event (JSON values, or a raw string sent as it is). */
  frames(event: RunEvent): unknown[];
  /** Raw frames after the final event (the AI SDK's `[DONE]`). */
  closing(): string[];
}

export interface StreamFormat {
  name: string;
  /** Response headers besides `content-type: text/event-stream`. */
  headers: Record<string, string>;
  /**
   * True when an event's frames depend on the events before it (open messages, steps): a resumed stream then
   * reads the run from its first event and sends only the frames of events after the resume point.
   */
  stateful: boolean;
  create(runId: string): Translator;
}

/** Tool call arguments as a JSON string (they may arrive as an object or as the model's raw text). */
export function argumentsText(args: unknown): string {
  return typeof args === 'string' ? args : JSON.stringify(args ?? {});
}

/** Tool call arguments, or a tool result's preview, as a value (text that is not JSON stays text). */
export function argumentsValue(args: unknown): unknown {
  if (typeof args !== 'string') return args ?? {};
  try {
    return JSON.parse(args) as unknown;
  } catch {
    return args;
  }
}
