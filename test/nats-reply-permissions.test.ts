import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, NatsBus, connectBackend, credentialsInUrls } from '@agentmesh/protocol';
import { startNatsServer, type NatsServerHandle } from './helpers/nats-server.js';

/**
 * NatsBus against a nats-server with per-user permissions: a request the server refuses (its publish, or the shared
 * reply subscription) fails at once with `permission_denied`, never as a timeout.
 */
const CONF = `
authorization {
  users = [
    { user: responder, password: rpass, permissions: {
        publish: { allow: ["svc.>", "_INBOX_requester.>", "_INBOX_noinbox.>"] },
        subscribe: { allow: ["svc.>", "_INBOX_responder.>"] } } }
    { user: requester, password: qpass, permissions: {
        publish: { allow: ["svc.>"] },
        subscribe: { allow: ["_INBOX_requester.>"] } } }
    { user: noinbox, password: npass, permissions: {
        publish: { allow: ["svc.>"] },
        subscribe: { allow: ["svc.>"] } } }
  ]
}
`;

let server: NatsServerHandle;
let dir: string;
const buses: NatsBus[] = [];

async function busAs(user: string, pass: string): Promise<NatsBus> {
  const bus = await NatsBus.connect(server.url, { user, pass, requireJetStream: false });
  buses.push(bus);
  return bus;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agentmesh-perm-'));
  const configFile = join(dir, 'nats.conf');
  writeFileSync(configFile, CONF);
  server = await startNatsServer({ configFile, jetstream: false });
  const responder = await busAs('responder', 'rpass');
  responder.subscribe('svc.echo', (m) => void responder.respond(m, m.data));
  await responder.flush();
});

afterAll(async () => {
  for (const bus of buses) await bus.close();
  await server?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

describe('NatsBus under server permissions', () => {
  it('answers an allowed request', async () => {
    const bus = await busAs('requester', 'qpass');
    expect((await bus.request('svc.echo', 'hi', { timeoutMs: 10_000 })).text()).toBe('hi');
  });

  it('fails a request whose publish is refused with permission_denied, not a timeout', async () => {
    const bus = await busAs('requester', 'qpass');
    const started = Date.now();
    const error = await bus.request('forbidden.thing', 'x', { timeoutMs: 20_000 }).catch((e: unknown) => e);
    expect(error).toMatchObject({
      code: ErrorCode.PermissionDenied,
      details: { subject: 'forbidden.thing' },
    });
    expect(Date.now() - started).toBeLessThan(15_000);
    expect((await bus.request('svc.echo', 'still fine', { timeoutMs: 10_000 })).text()).toBe('still fine');
  });

  it('fails waiting requests with permission_denied when the reply subscription is refused, every time', async () => {
    const bus = await busAs('noinbox', 'npass');
    for (let i = 0; i < 2; i++) {
      const started = Date.now();
      const error = await bus.request('svc.echo', 'x', { timeoutMs: 20_000 }).catch((e: unknown) => e);
      expect(error).toMatchObject({
        code: ErrorCode.PermissionDenied,
        details: { operation: 'subscription' },
      });
      expect(Date.now() - started).toBeLessThan(15_000);
    }
  });
});

describe('credentials in a comma-separated server list', () => {
  it('are read from the URLs and used for the connection', async () => {
    const port = new URL(server.url).port;
    const list = `nats://requester:qpass@127.0.0.1:${port},nats://requester:qpass@localhost:${port}`;
    const bus = await connectBackend({ servers: list, requireJetStream: false });
    try {
      await expect(bus.request('svc.nobody', 'x', { timeoutMs: 2_000 })).rejects.toMatchObject({
        code: ErrorCode.NoResponders,
      });
    } finally {
      await bus.close();
    }
  });

  it('name user and password, or a token', () => {
    expect(credentialsInUrls(['nats://a:b%40c@h:1', 'nats://x:y@h:2'])).toEqual({ user: 'a', pass: 'b@c' });
    expect(credentialsInUrls(['nats://h:1', 'nats://tok@h:2'])).toEqual({ token: 'tok' });
    expect(credentialsInUrls(['nats://h:1', 'h:2'])).toBeUndefined();
  });
});
