import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Catalog } from '@agentmesh/catalog';
import {
  CatalogRegisterReplySchema,
  CatalogSearchReplySchema,
  connectBus,
  requestJson,
  silentLogger,
  subjects,
  type Backend,
} from '@agentmesh/protocol';
import { startNatsServer, type NatsServerHandle } from './helpers/nats-server.js';
import { loadCatalogFixture } from './fixtures/catalog/load.js';
import { until } from './helpers/wait.js';

const tools = loadCatalogFixture().slice(0, 50);

let server: NatsServerHandle;
let catalogBus: Backend;
let otherBus: Backend;
let client: Backend;
beforeAll(async () => {
  server = await startNatsServer();
  catalogBus = await connectBus({ natsUrl: server.url, logger: silentLogger() });
  otherBus = await connectBus({ natsUrl: server.url, logger: silentLogger() });
  client = await connectBus({ natsUrl: server.url, logger: silentLogger() });
});
afterAll(async () => {
  await Promise.all([catalogBus.close(), otherBus.close(), client.close()]);
  await server.dispose();
});

describe('catalog across a nats-server restart', () => {
  it('keeps its tools, reconnects, and sees registrations made after the restart', async () => {
    const a = new Catalog({ bus: catalogBus, logger: silentLogger() });
    const b = new Catalog({ bus: otherBus, logger: silentLogger() });
    await a.start();
    await b.start();
    const s = subjects();
    await requestJson(
      client,
      s.catalogRegister,
      { worker_id: 'before', tools: tools.slice(0, 25) },
      CatalogRegisterReplySchema,
    );
    await until(
      'both replicas to hold 25 tools',
      () => a.toolNames().length === 25 && b.toolNames().length === 25,
    );

    await server.restart(200);

    await until('registration after the restart', async () => {
      try {
        await requestJson(
          client,
          s.catalogRegister,
          { worker_id: 'after', tools: tools.slice(25) },
          CatalogRegisterReplySchema,
          {
            timeoutMs: 1000,
          },
        );
        return true;
      } catch {
        return false;
      }
    });
    await until(
      'both replicas to hold 50 tools',
      () => a.toolNames().length === 50 && b.toolNames().length === 50,
    );
    const reply = await requestJson(
      client,
      s.catalogSearch,
      { query: tools[30]!.name, deferred_only: false },
      CatalogSearchReplySchema,
    );
    expect(reply.results[0]?.name).toBe(tools[30]!.name);
    await a.stop();
    await b.stop();
  });
});
