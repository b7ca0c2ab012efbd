import { mkdtempSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GatewayAuth, loadApiKeys } from './auth.js';

const A = 'a'.repeat(32);
const B = 'b'.repeat(40);
const C = 'c'.repeat(33);

const request = (authorization?: string) =>
  ({ headers: authorization === undefined ? {} : { authorization } }) as IncomingMessage;

describe('gateway API keys', () => {
  it('merges keys from the config, a file and the environment', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-keys-'));
    const file = join(dir, 'keys.yaml');
    writeFileSync(file, `${B}: globex\n`);
    const keys = loadApiKeys({ inline: { [A]: 'acme' }, file, env: `${C}=initech` });
    expect([...keys]).toEqual([
      [A, 'acme'],
      [B, 'globex'],
      [C, 'initech'],
    ]);
  });

  it('refuses a key shorter than 32 characters without printing it', () => {
    expect(() => loadApiKeys({ env: 'short-key=acme' })).toThrow(
      /of tenant "acme"\) is 9 characters long; keys need at least 32/,
    );
    expect(() => loadApiKeys({ env: 'short-key=acme' })).not.toThrow(/short-key/);
    expect(() => loadApiKeys({ env: A })).toThrow(/"key=tenant" pairs/);
  });

  it('maps a bearer key to its tenant and refuses anything else with 401', () => {
    const auth = new GatewayAuth(
      new Map([
        [A, 'acme'],
        [B, 'globex'],
      ]),
    );
    expect(auth.open).toBe(false);
    expect(auth.tenantOf(request(`Bearer ${B}`))).toBe('globex');
    expect(() => auth.tenantOf(request())).toThrow(expect.objectContaining({ status: 401 }));
    expect(() => auth.tenantOf(request(`Bearer ${A}x`))).toThrow(/not one of the gateway's keys/);
    expect(new GatewayAuth(new Map()).tenantOf(request())).toBe('default');
  });
});
