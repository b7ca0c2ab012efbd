import { AgentMeshError, ErrorCode } from '../errors.js';
import type { BusPayload } from './types.js';

const encoder = new TextEncoder();
export const EMPTY = new Uint8Array(0);
export const DEFAULT_REQUEST_TIMEOUT_MS = 5000;
export const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

export function toBytes(data: BusPayload): Uint8Array {
  return typeof data === 'string' ? encoder.encode(data) : data;
}

/** The size of a payload on the wire, in bytes. */
export function payloadSize(data: BusPayload): number {
  return typeof data === 'string' ? Buffer.byteLength(data, 'utf8') : data.length;
}

export function assertPayloadSize(subject: string, size: number, maxPayload: number): void {
  if (size > maxPayload)
    throw new AgentMeshError(
      ErrorCode.PayloadTooLarge,
      `payload of ${size} bytes for ${subject} exceeds the bus limit of ${maxPayload} bytes`,
      { retryable: false, details: { subject, size, max_payload: maxPayload } },
    );
}

export function timeoutError(subject: string, timeoutMs: number): AgentMeshError {
  return new AgentMeshError(ErrorCode.Timeout, `request to ${subject} timed out after ${timeoutMs} ms`, {
    details: { subject, timeout_ms: timeoutMs },
  });
}

export function noRespondersError(subject: string): AgentMeshError {
  return new AgentMeshError(ErrorCode.NoResponders, `no responders are listening on ${subject}`, {
    details: { subject },
  });
}

export function cancelledError(subject: string, reason?: unknown): AgentMeshError {
  const why = reason instanceof Error ? reason.message : typeof reason === 'string' ? reason : undefined;
  return new AgentMeshError(
    ErrorCode.Cancelled,
    `request to ${subject} was cancelled${why ? `: ${why}` : ''}`,
    {
      retryable: false,
      details: { subject },
    },
  );
}

export function closedError(): AgentMeshError {
  return new AgentMeshError(ErrorCode.Closed, 'the bus is closed', { retryable: false });
}

/** NATS subject matching with `*` (one token) and `>` (one or more trailing tokens), token by token in place. */
export function subjectMatches(pattern: string, subject: string): boolean {
  if (pattern === subject) return true;
  let p = 0;
  let s = 0;
  for (;;) {
    const pEnd = tokenEnd(pattern, p);
    const wild = pEnd - p === 1 ? pattern.charCodeAt(p) : 0;
    if (wild === GREATER) return s <= subject.length;
    if (s > subject.length) return false;
    const sEnd = tokenEnd(subject, s);
    if (wild !== STAR && !sameToken(pattern, p, pEnd, subject, s, sEnd)) return false;
    if (pEnd === pattern.length) return sEnd === subject.length;
    p = pEnd + 1;
    s = sEnd + 1;
  }
}

const STAR = 42;
const GREATER = 62;

function tokenEnd(text: string, from: number): number {
  const dot = text.indexOf('.', from);
  return dot < 0 ? text.length : dot;
}

function sameToken(a: string, aFrom: number, aEnd: number, b: string, bFrom: number, bEnd: number): boolean {
  if (aEnd - aFrom !== bEnd - bFrom) return false;
  for (let i = 0; i < aEnd - aFrom; i++)
    if (a.charCodeAt(aFrom + i) !== b.charCodeAt(bFrom + i)) return false;
  return true;
}

/** White space and control characters: inside a protocol line they would end the subject or the line. */
const SUBJECT_BREAKING = /[\s\x00-\x1f\x7f]/;

/** Whether a subject can be published to without breaking the NATS protocol line that carries it. */
export function isPublishableSubject(subject: string): boolean {
  return subject.length > 0 && !SUBJECT_BREAKING.test(subject);
}

export function isValidSubject(subject: string, allowWildcards: boolean): boolean {
  if (!isPublishableSubject(subject)) return false;
  let start = 0;
  for (;;) {
    const end = tokenEnd(subject, start);
    if (end === start) return false;
    const wild = end - start === 1 ? subject.charCodeAt(start) : 0;
    if ((wild === STAR || wild === GREATER) && !allowWildcards) return false;
    if (wild === GREATER && end !== subject.length) return false;
    if (end === subject.length) return true;
    start = end + 1;
  }
}

export function invalidSubjectError(subject: string): AgentMeshError {
  return new AgentMeshError(ErrorCode.InvalidMessage, `invalid subject "${subject}"`, {
    retryable: false,
    details: { subject },
  });
}

/** Counts handler promises in flight so drain can wait for them (a count, not a set: one derived promise each). */
export class InFlight {
  private count = 0;
  private idle: (() => void)[] | undefined;
  private readonly done = (): void => {
    if (--this.count > 0 || this.idle === undefined) return;
    const waiting = this.idle;
    this.idle = undefined;
    for (const resolve of waiting) resolve();
  };

  /** Tracks a handler's promise; a rejection goes to `onError`. */
  track(p: Promise<unknown>, onError: (error: unknown) => void): void {
    this.count++;
    p.then(this.done, (error: unknown) => {
      onError(error);
      this.done();
    });
  }

  /** Resolves once no tracked promise is pending (those tracked meanwhile included). */
  settle(): Promise<void> {
    if (this.count === 0) return Promise.resolve();
    return new Promise<void>((resolve) => (this.idle ??= []).push(resolve));
  }
}
