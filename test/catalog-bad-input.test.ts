import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Catalog } from '@agentmesh/catalog';
import {
  AgentMeshError,
  CatalogRegisterReplySchema,
  CatalogSearchReplySchema,
  ToolSpecSchema,
  connectBus,
  requestJson,
  silentLogger,
  subjects,
  throwIfErrorReply,
  type Backend,
  type NatsBus,
} from '@agentmesh/protocol';
import { inject } from 'vitest';

const natsUrl = inject('natsUrl');
const id = randomUUID().slice(0, 8);
const prefix = `bad${id}`;
const bucket = `catalog_bad_${id}`;
const s = subjects(prefix);
let bus: Backend;
let catalog: Catalog;

const tool = ToolSpecSchema.parse({
  name: 'crypto.sha256',
  description: 'Compute the SHA-256 hash of a text',
  namespace: 'crypto',
  input_schema: { type: 'object', properties: { text: { type: 'string' } } },
  safety: {},
  timeout_ms: 1000,
  retry: { max_attempts: 1, timeout_ms: 1000, retry_on: [], backoff_ms: 0, max_backoff_ms: 0, jitter: 0 },
  idempotent: true,
  loading: 'deferred',
});

beforeAll(async () => {
  bus = await connectBus({ natsUrl, logger: silentLogger() });
  catalog = new Catalog({ bus, prefix, bucket, logger: silentLogger(), maxRegisterBytes: 256 * 1024 });
  await catalog.start();
  await requestJson(bus, s.catalogRegister, { worker_id: 'w1', tools: [tool] }, CatalogRegisterReplySchema);
});
afterAll(async () => {
  await catalog.stop();
  const jsm = await (bus as NatsBus).jetstreamManager();
  await jsm.streams.delete(`KV_${bucket}`).catch(() => undefined);
  await bus.close();
});

/** Sends raw bytes and returns the revived error of the reply. */
async function errorFor(subject: string, body: string): Promise<AgentMeshError> {
  const msg = await bus.request(subject, body, { timeoutMs: 3000 });
  try {
    throwIfErrorReply(msg);
  } catch (error) {
    return error as AgentMeshError;
  }
  throw new Error(`expected an error reply from ${subject}, got ${msg.text()}`);
}

const SUBJECTS = {
  register: {
    subject: s.catalogRegister,
    wrongType: { worker_id: 7, tools: [] },
    field: 'worker_id',
    missing: { tools: [] },
  },
  deregister: {
    subject: s.catalogDeregister,
    wrongType: { worker_id: ['x'] },
    field: 'worker_id',
    missing: {},
  },
  heartbeat: {
    subject: s.catalogHeartbeat,
    wrongType: { worker_id: false },
    field: 'worker_id',
    missing: {},
  },
  list: { subject: s.catalogList, wrongType: { namespace: 3 }, field: 'namespace', missing: undefined },
  get: { subject: s.catalogGet, wrongType: { name: 42 }, field: 'name', missing: {} },
  search: {
    subject: s.catalogSearch,
    wrongType: { query: 'x', limit: 'ten' },
    field: 'limit',
    missing: { limit: 3 },
  },
} as const;

describe('catalog subjects reject bad input with an error that names the field', () => {
  for (const [verb, c] of Object.entries(SUBJECTS)) {
    it(`${verb}: malformed JSON, wrong type, missing field, unknown field, oversized`, async () => {
      const malformed = await errorFor(c.subject, '{"worker_id": ');
      expect(malformed.code).toBe('invalid_message');
      expect(malformed.message).toMatch(/not valid JSON/);

      const wrong = await errorFor(c.subject, JSON.stringify(c.wrongType));
      expect(wrong.code).toBe('invalid_message');
      expect(wrong.message).toContain(`${c.field}:`);

      if (c.missing !== undefined) {
        const missing = await errorFor(c.subject, JSON.stringify(c.missing));
        expect(missing.code).toBe('invalid_message');
        expect(missing.message).toMatch(verb === 'search' ? /query:/ : new RegExp(`${c.field}:`));
      }

      const unknown = await errorFor(c.subject, JSON.stringify({ ...(c.missing ?? {}), bogus: 1 }));
      expect(unknown.message).toContain('bogus');

      const size = verb === 'register' ? 300 * 1024 : 70 * 1024;
      const oversized = await errorFor(c.subject, JSON.stringify({ pad: 'x'.repeat(size) }));
      expect(oversized.code).toBe('payload_too_large');
      expect(oversized.message).toMatch(/exceeds the limit/);
    });
  }

  it('register: a bad tool name and a bad spec field are named', async () => {
    const badName = await errorFor(
      s.catalogRegister,
      JSON.stringify({ worker_id: 'w', tools: [{ ...tool, name: 'Bad__Name' }] }),
    );
    expect(badName.message).toMatch(/tools\.0\.name/);
    const badField = await errorFor(
      s.catalogRegister,
      JSON.stringify({ worker_id: 'w', tools: [{ ...tool, timeout_ms: -1 }] }),
    );
    expect(badField.message).toMatch(/tools\.0\.timeout_ms/);
  });

  it('search: empty query, unsafe or broken regex, extreme limits', async () => {
    const search = (body: Record<string, unknown>) =>
      requestJson(bus, s.catalogSearch, body, CatalogSearchReplySchema);
    await expect(search({ query: '' })).rejects.toMatchObject({
      code: 'invalid_request',
      message: 'query must not be empty',
    });
    await expect(search({ query: '(unclosed', strategy: 'regex' })).rejects.toMatchObject({
      code: 'invalid_request',
      message: expect.stringMatching(/does not compile/),
    });
    await expect(search({ query: '(a+)+$', strategy: 'regex' })).rejects.toMatchObject({
      code: 'invalid_request',
      message: expect.stringMatching(/nested quantifiers/),
    });
    await expect(search({ query: 'x', strategy: 'fuzzy' })).rejects.toMatchObject({
      code: 'invalid_message',
      message: expect.stringMatching(/strategy:/),
    });
    expect((await search({ query: 'sha256', limit: 0 })).limit).toBe(1);
    expect((await search({ query: 'sha256', limit: 10_000 })).limit).toBe(50);
    expect((await search({ query: 'no such thing whatsoever' })).results).toEqual([]);
  });

  it('still answers after all of it', async () => {
    const reply = await requestJson(
      bus,
      s.catalogSearch,
      { query: 'hash text sha256' },
      CatalogSearchReplySchema,
    );
    expect(reply.results[0]?.name).toBe('crypto.sha256');
  });
});
