import { describe, expect, it } from 'vitest';
import type { BusMessage } from '@agentmesh/protocol';
import { tenantRequest } from './tenant-runs.js';

const msg = (body: unknown): BusMessage => {
  const text = JSON.stringify(body);
  return {
    subject: 's',
    data: new TextEncoder().encode(text),
    headers: undefined,
    reply: undefined,
    text: () => text,
  };
};

describe('tenantRequest', () => {
  it('stamps the tenant of the subject on a request naming none, and keeps the rest of identity', () => {
    const request = tenantRequest('acme', msg({ id: 'r1', task: 't', identity: { user: 'ann' } }));
    expect(request.identity).toEqual({ user: 'ann', tenant: 'acme' });
    expect(tenantRequest('acme', msg({ task: 't' })).id).toMatch(/^run-/);
  });

  it('refuses another tenant naming both, a parent, and a malformed identity', () => {
    expect(() => tenantRequest('acme', msg({ task: 't', identity: { tenant: 'globex' } }))).toThrow(
      /names tenant "globex" but these credentials are of tenant "acme"/,
    );
    expect(() => tenantRequest('acme', msg({ task: 't', parent: { run_id: 'x', call_id: 'c' } }))).toThrow(
      /parent is set by the planner/,
    );
    expect(() => tenantRequest('acme', msg({ task: 't', identity: 'acme' }))).toThrow(/identity/);
    expect(() => tenantRequest('acme', msg({ id: 'a.b', task: 't' }))).toThrow(/invalid run request/);
  });
});
