import { randomFillSync } from 'node:crypto';

/** Characters of a {@link replySecret}: 18 random bytes (144 bits) in base64url. */
export const REPLY_SECRET_LENGTH = 24;
const BYTES = 18;
/** Secrets drawn per fill of the random pool: one fill, and one base64url encoding, per 256 requests. */
const BATCH = 256;

let pool = '';
let at = 0;

/**
 * A fresh unguessable 24-character token (144 random bits, base64url), the first part of every reply and progress
 * subject a requester makes. A responder learns the subjects of the calls it gets, and may publish to the caller's
 * inbox space (progress notices); the secret keeps it from guessing, and so answering, the subject of another call.
 */
export function replySecret(): string {
  if (at === pool.length) {
    pool = randomFillSync(Buffer.allocUnsafe(BYTES * BATCH)).toString('base64url');
    at = 0;
  }
  const secret = pool.slice(at, at + REPLY_SECRET_LENGTH);
  at += REPLY_SECRET_LENGTH;
  return secret;
}
