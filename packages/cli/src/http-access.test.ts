import { describe, expect, it } from 'vitest';
import {
  accessToken,
  allowedHosts,
  bearerToken,
  hostAllowed,
  newAccessToken,
  tokenMatches,
} from './http-access.js';

describe('access tokens and Host checks of the HTTP faces', () => {
  it('makes a fresh 256-bit token when none is given, and refuses a short one naming its source', () => {
    const made = accessToken(undefined, '--token');
    expect(made.generated).toBe(true);
    expect(Buffer.from(made.token, 'base64url')).toHaveLength(32);
    expect(newAccessToken()).not.toBe(made.token);
    expect(() => accessToken('short', '--token (AGENTMESH_MCP_TOKEN)')).toThrow(
      /--token \(AGENTMESH_MCP_TOKEN\) must be at least 32 characters long \(got 5\)/,
    );
    expect(accessToken('x'.repeat(32), '--token')).toEqual({ token: 'x'.repeat(32), generated: false });
  });

  it('matches only the exact token, and reads it from a Bearer header', () => {
    const token = newAccessToken();
    expect(tokenMatches(token, token)).toBe(true);
    expect(tokenMatches(`${token}x`, token)).toBe(false);
    expect(tokenMatches(undefined, token)).toBe(false);
    expect(bearerToken(`Bearer ${token}`)).toBe(token);
    expect(bearerToken(`Basic ${token}`)).toBeUndefined();
    expect(bearerToken(undefined)).toBeUndefined();
  });

  it('answers to the loopback names and the bound address with the port, never to another name', () => {
    expect(allowedHosts('127.0.0.1', 7070)).toEqual(['127.0.0.1:7070', 'localhost:7070', '[::1]:7070']);
    expect(allowedHosts('0.0.0.0', 7070)).toHaveLength(3);
    expect(allowedHosts('10.0.0.5', 7070)).toContain('10.0.0.5:7070');
    expect(allowedHosts('::1', 7070)).toHaveLength(3);
    const hosts = allowedHosts('127.0.0.1', 80);
    expect(hostAllowed('LOCALHOST:80', hosts)).toBe(true);
    expect(hostAllowed('localhost', hosts)).toBe(true);
    expect(hostAllowed('rebound.example:80', hosts)).toBe(false);
    expect(hostAllowed('127.0.0.1:81', hosts)).toBe(false);
    expect(hostAllowed(undefined, hosts)).toBe(false);
  });
});
