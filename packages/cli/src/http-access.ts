import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';

/** The shortest access token accepted from a flag or the environment (32 hex digits = 128 bits). */
export const MIN_TOKEN_LENGTH = 32;

/** A fresh access token: 256 random bits, URL-safe. */
export function newAccessToken(): string {
  return randomBytes(32).toString('base64url');
}

/** The token given by a flag or the environment, checked for length, or a fresh one when none is given. */
export function accessToken(
  given: string | undefined,
  source: string,
): { token: string; generated: boolean } {
  if (given === undefined) return { token: newAccessToken(), generated: true };
  if (given.length < MIN_TOKEN_LENGTH)
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `${source} must be at least ${MIN_TOKEN_LENGTH} characters long (got ${given.length}); ` +
        'leave it out to have a random one generated',
    );
  return { token: given, generated: false };
}

/** Compares a presented token with the expected one in constant time (both are hashed to equal lengths first). */
export function tokenMatches(presented: string | undefined, expected: string): boolean {
  if (presented === undefined) return false;
  const a = createHash('sha256').update(presented).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/** The token of an `Authorization: Bearer <token>` header, if there is one. */
export function bearerToken(header: string | string[] | undefined): string | undefined {
  if (typeof header !== 'string') return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/**
 * The `Host` header values a server bound to `host:port` answers to: the loopback names, plus the bound address
 * itself when it is not a wildcard. Anything else (a rebinding DNS name) is refused.
 */
export function allowedHosts(host: string, port: number): string[] {
  const names = ['127.0.0.1', 'localhost', '[::1]'];
  const bound = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  if (!['0.0.0.0', '[::]', ''].includes(bound) && !names.includes(bound)) names.push(bound);
  return names.map((name) => `${name}:${port}`);
}

/** Whether a `Host` header names one of `allowed` (compared without case; port 80 may be left out). */
export function hostAllowed(header: string | undefined, allowed: readonly string[]): boolean {
  if (header === undefined) return false;
  const host = header.toLowerCase();
  return allowed.includes(host) || allowed.includes(`${host}:80`);
}
