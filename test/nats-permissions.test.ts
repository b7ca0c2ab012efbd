import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { PermissionViolationError } from '@nats-io/nats-core';
import type { Msg, NatsConnection } from '@nats-io/nats-core';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Svcm } from '@nats-io/services';
import { parse } from 'yaml';
import {
  silentLogger,
  ARTIFACTS_BUCKET,
  CATALOG_BUCKET,
  EVENTS_STREAM,
  CatalogRegisterReplySchema,
  NatsBus,
  inboxPrefixFor,
  requestJson,
  RUNS_STREAM,
  ServiceName,
  ensureRunStreams,
  subjects,
  toolQueueGroup,
} from '@agentmesh/protocol';
import type { BusMessage } from '@agentmesh/protocol';
import { findNatsServerBinary, freePort, startNatsServer } from './helpers/nats-server.js';
import type { NatsServerHandle } from './helpers/nats-server.js';

/**
 * deploy/nats/nats.conf against a real nats-server: each role connects as its own user with the real @nats-io
 * clients (and the protocol's own KV, object store, stream and service helpers), the traffic of the contract
 * flows, and what a role must not do is refused by the server with a permissions violation.
 */

const CONF = fileURLToPath(new URL('../deploy/nats/nats.conf', import.meta.url));
const S = subjects();
const PLANNER_CONSUMER = 'agentmesh-planner';
/** The planner's own stores (`runsBucket()` / `transcriptsBucket()` of @agentmesh/planner; deploy-files checks). */
const PLANNER_RUNS_BUCKET = 'agentmesh_runs';
const PLANNER_TRANSCRIPTS_BUCKET = 'agentmesh_transcripts';
/** The tool workers' shared outcome store (`<prefix>_tool_outcomes`). */
const OUTCOMES_BUCKET = 'agentmesh_tool_outcomes';
const ROLES = ['catalog', 'planner', 'worker', 'worker_math', 'client', 'ops'] as const;
type Role = (typeof ROLES)[number];
// nats.conf parses an environment variable's value like a config value: a password must start with a letter.
const passwords = Object.fromEntries(ROLES.map((r) => [r, `p${randomBytes(12).toString('hex')}`])) as Record<
  Role,
  string
>;
const enc = new TextEncoder();
/** The catalog's worker roles as deploy/docker-compose.yml configures them (AGENTMESH_CATALOG_ROLES). */
const DEPLOY_ROLES_TEXT = (
  parse(readFileSync(new URL('../deploy/docker-compose.yml', import.meta.url), 'utf8')) as {
    services: { catalog: { environment: Record<string, string> } };
  }
).services.catalog.environment['AGENTMESH_CATALOG_ROLES']!;

let server: NatsServerHandle;
const opened: { close(): Promise<void> }[] = [];

interface RoleConnection {
  nc: NatsConnection;
  violations: PermissionViolationError[];
}

function watchViolations(nc: NatsConnection): PermissionViolationError[] {
  const violations: PermissionViolationError[] = [];
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'error' && s.error instanceof PermissionViolationError) violations.push(s.error);
    }
  })();
  return violations;
}

async function as(role: Role): Promise<RoleConnection> {
  // agentmesh roles reply on their own inbox space (NatsBus does the same); the client role is a plain client
  const inboxPrefix = role === 'client' ? '_INBOX' : inboxPrefixFor(server.url, { user: role });
  const nc = await connect({
    servers: server.url,
    user: role,
    pass: passwords[role],
    name: `test-${role}`,
    inboxPrefix,
  });
  opened.push({ close: () => nc.close() });
  return { nc, violations: watchViolations(nc) };
}

async function busAs(role: Role): Promise<{ bus: NatsBus; violations: PermissionViolationError[] }> {
  const bus = await NatsBus.connect(server.url, {
    user: role,
    pass: passwords[role],
    name: `test-bus-${role}`,
  });
  opened.push({ close: () => bus.close() });
  return { bus, violations: watchViolations(bus.nc) };
}

async function waitFor(check: () => boolean, what: string, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function expectPublishRefused(c: RoleConnection, subject: string): Promise<void> {
  c.nc.publish(subject, enc.encode('{}'));
  await c.nc.flush();
  await waitFor(
    () => c.violations.some((v) => v.operation === 'publish' && v.subject === subject),
    `a publish violation on ${subject}`,
  );
}

async function expectSubscribeRefused(c: RoleConnection, subject: string, queue?: string): Promise<void> {
  const sub = c.nc.subscribe(subject, queue === undefined ? {} : { queue });
  await c.nc.flush();
  const closed = await Promise.race([
    sub.closed,
    new Promise<'still open'>((r) => setTimeout(() => r('still open'), 3000)),
  ]);
  expect(closed, `subscription to ${subject}`).toBeInstanceOf(PermissionViolationError);
  expect((closed as PermissionViolationError).operation).toBe('subscription');
  expect((closed as PermissionViolationError).subject).toBe(subject);
}

function noViolations(...conns: { violations: PermissionViolationError[] }[]): void {
  for (const c of conns) expect(c.violations.map((v) => v.message)).toEqual([]);
}

beforeAll(async () => {
  for (const role of ROLES) process.env[`NATS_${role.toUpperCase()}_PASSWORD`] = passwords[role];
  for (const tenant of ['ACME', 'GLOBEX'])
    process.env[`NATS_TENANT_${tenant}_PASSWORD`] = `p${randomBytes(12).toString('hex')}`;
  server = await startNatsServer({ configFile: CONF, extraArgs: ['-m', String(await freePort())] });
  // The planner owns the run streams and its durable consumer: create them as the planner user.
  const { bus } = await busAs('planner');
  await ensureRunStreams(bus);
  const jsm = await bus.jetstreamManager();
  await jsm.consumers.add(RUNS_STREAM, { durable_name: PLANNER_CONSUMER, ack_policy: AckPolicy.Explicit });
});

afterAll(async () => {
  for (const o of opened.reverse()) await o.close().catch(() => undefined);
  await server?.dispose();
});

describe('deploy/nats/nats.conf on a real nats-server', () => {
  test('the server refuses to start without every password, or with one it reads as a number', () => {
    const bin = findNatsServerBinary()!;
    const env = (override: Record<string, string | undefined>) => {
      const e: Record<string, string | undefined> = { ...process.env, ...override };
      for (const [k, v] of Object.entries(override)) if (v === undefined) delete e[k];
      return e as NodeJS.ProcessEnv;
    };
    const check = (override: Record<string, string | undefined>) =>
      spawnSync(bin, ['-c', CONF, '-t'], { env: env(override), encoding: 'utf8' });
    expect(check({}).status).toBe(0);
    const missing = check({ NATS_WORKER_PASSWORD: undefined });
    expect(missing.status).not.toBe(0);
    expect(`${missing.stdout}${missing.stderr}`).toContain('NATS_WORKER_PASSWORD');
    // Read as a number or a float with an exponent, not as a string.
    for (const bad of ['1234', '6e2a']) expect(check({ NATS_WORKER_PASSWORD: bad }).status, bad).not.toBe(0);
  });

  test('refuses anonymous connections and wrong passwords; every role has its user', async () => {
    await expect(connect({ servers: server.url })).rejects.toThrow(/authorization/i);
    await expect(connect({ servers: server.url, user: 'worker', pass: 'wrong' })).rejects.toThrow(
      /authorization/i,
    );
    for (const role of ROLES) {
      const { nc } = await as(role);
      expect(nc.isClosed()).toBe(false);
    }
  });

  test('the contract traffic flows: submit, intake, events, tool calls, progress, cancel, catalog, artifacts, discovery', async () => {
    const catalog = await busAs('catalog');
    const planner = await busAs('planner');
    const worker = await busAs('worker');
    const client = await as('client');
    const ops = await as('ops');

    // catalog: its KV bucket (create, put, get, compare-and-set, keys, watch, delete) and its request subjects.
    const kv = await catalog.bus.kv(CATALOG_BUCKET);
    const rev = await kv.put('tools.math__calc', enc.encode('{"name":"math.calc"}'));
    expect((await kv.get('tools.math__calc'))?.revision).toBe(rev);
    await kv.update('tools.math__calc', enc.encode('{"name":"math.calc","v":2}'), rev);
    await kv.create('workers.w1', enc.encode('{}'));
    expect(await kv.keys()).toEqual(expect.arrayContaining(['tools.math__calc', 'workers.w1']));
    const seen: string[] = [];
    const watcher = await kv.watch((e) => seen.push(e.key));
    await waitFor(() => seen.includes('workers.w1'), 'the KV watch');
    watcher.stop();
    await kv.delete('workers.w1');
    const registered: string[] = [];
    catalog.bus.subscribe(
      `${S.prefix}.catalog.>`,
      (m: BusMessage) => {
        if (m.subject === S.catalogRegisterAs('worker')) registered.push(m.text());
        catalog.bus.respond(m, JSON.stringify({ ok: true, subject: m.subject }));
      },
      { queue: 'agentmesh-catalog' },
    );
    const catalogService = await catalog.bus.announce({
      name: ServiceName.Catalog,
      version: '0.0.0',
      description: 'test',
    });

    // worker: object store for heavy outputs, its tool subject in the tool's queue group, cancels, artifact fetch.
    const blobs = await worker.bus.blobs(ARTIFACTS_BUCKET);
    const heavy = randomBytes(300_000);
    await blobs.put('t1/heavy', heavy, { mime: 'application/octet-stream', meta: { tenant: 't1' } });
    expect((await blobs.get('t1/heavy'))?.data).toEqual(new Uint8Array(heavy));
    const cancels: string[] = [];
    worker.bus.subscribe(S.allRunCancels, (m) => void cancels.push(m.subject));
    worker.bus.subscribe(
      S.toolInvoke('math.calc'),
      (m) => {
        // as the real worker does: progress notices go to the progress subject the caller named (its own inbox)
        const { progress_subject } = JSON.parse(m.text()) as { progress_subject: string };
        worker.bus.publish(progress_subject, JSON.stringify({ kind: 'started' }));
        worker.bus.respond(m, JSON.stringify({ ok: true, value: 5 }));
      },
      { queue: toolQueueGroup('math.calc') },
    );
    worker.bus.subscribe(S.artifactFetch, async (m) => {
      const blob = await blobs.get((JSON.parse(m.text()) as { ref: string }).ref);
      worker.bus.respond(m, JSON.stringify({ size: blob?.data.length ?? -1 }));
    });
    const workerService = await worker.bus.announce({
      name: ServiceName.ToolWorker,
      version: '0.0.0',
      description: 'test',
    });
    const reg = await worker.bus.request(
      S.catalogRegisterAs('worker'),
      JSON.stringify({ worker_id: 'w1', tools: [] }),
    );
    expect(JSON.parse(reg.text())).toEqual({ ok: true, subject: S.catalogRegisterAs('worker') });
    worker.bus.publish(S.catalogHeartbeat, JSON.stringify({ worker_id: 'w1' }));
    await worker.bus.flush();
    await waitFor(() => registered.length === 1, 'the registration');

    // capacity notices: a worker that turned calls away says when it has room; the planner sends to its own subject
    const notices: string[] = [];
    planner.bus.subscribe(S.toolCapacity('math.calc'), (m) => void notices.push(m.text()));
    await planner.bus.flush();
    const direct = S.toolInvokeDirect('math.calc', 'Wperm');
    worker.bus.subscribe(direct, (m) => void worker.bus.respond(m, JSON.stringify({ direct: true })));
    worker.bus.publish(S.toolCapacity('math.calc'), JSON.stringify({ invoke: direct, free: 1 }));
    await worker.bus.flush();
    await waitFor(() => notices.length === 1, 'the capacity notice');
    expect(JSON.parse((await planner.bus.request(direct, '{}')).text())).toEqual({ direct: true });

    // client: a plain request on runs.submit gets the JetStream PubAck.
    const runId = 'run-perm-1';
    const ack = await client.nc.request(S.runsSubmit, JSON.stringify({ id: runId, task: 'add 2 and 3' }));
    expect(JSON.parse(ack.string())).toMatchObject({ stream: RUNS_STREAM });
    const liveEvents: string[] = [];
    client.nc.subscribe(S.allRunEvents, { callback: (_e, m: Msg) => void liveEvents.push(m.subject) });
    await client.nc.flush();

    // planner: takes the run from the durable consumer, calls the tool, sees progress, publishes events.
    const progress: string[] = [];
    const progressSubject = planner.bus.createInbox();
    expect(progressSubject.startsWith('_INBOX_planner.')).toBe(true);
    planner.bus.subscribe(progressSubject, (m) => void progress.push(m.subject));
    planner.bus.subscribe(S.allRunCancels, () => undefined);
    await planner.bus.flush();
    const consumer = await planner.bus.jetstream().consumers.get(RUNS_STREAM, PLANNER_CONSUMER);
    const intake = await consumer.next({ expires: 2000 });
    expect(intake?.json<{ id: string }>().id).toBe(runId);
    intake?.working();
    const call = await planner.bus.request(
      S.toolInvoke('math.calc'),
      JSON.stringify({ run_id: runId, call_id: 'c1', progress_subject: progressSubject }),
    );
    expect(JSON.parse(call.text())).toEqual({ ok: true, value: 5 });
    await waitFor(() => progress.includes(progressSubject), 'tool progress');
    const fetched = await planner.bus.request(S.artifactFetch, JSON.stringify({ ref: 't1/heavy' }));
    expect(JSON.parse(fetched.text())).toEqual({ size: heavy.length });
    for (const subject of [S.catalogSearch, S.catalogGet, S.catalogList]) {
      const reply = await planner.bus.request(subject, JSON.stringify({ query: 'math' }));
      expect(JSON.parse(reply.text())).toEqual({ ok: true, subject });
    }
    // planner: its run records (KV) and transcripts (object store), with the TTL options it opens them with.
    const week = 7 * 24 * 3_600_000;
    const records = await planner.bus.kv(PLANNER_RUNS_BUCKET, { ttlMs: week });
    await records.create(runId, enc.encode('{"state":"running"}'));
    expect(new TextDecoder().decode((await records.get(runId))?.value)).toBe('{"state":"running"}');
    const transcripts = await planner.bus.blobs(PLANNER_TRANSCRIPTS_BUCKET, { ttlMs: week });
    await transcripts.put(runId, enc.encode('{"version":1}'), { mime: 'application/json' });
    expect(new TextDecoder().decode((await transcripts.get(runId))?.data)).toBe('{"version":1}');
    const js = planner.bus.jetstream();
    for (const [seq, type] of [
      [1, 'run.accepted'],
      [2, 'run.completed'],
    ] as const) {
      const pa = await js.publish(S.runEvents(runId), JSON.stringify({ type, run_id: runId, seq }), {
        msgID: `${runId}:${seq}`,
      });
      expect(pa.stream).toBe(EVENTS_STREAM);
    }
    await intake?.ackAck();
    const last = await (
      await planner.bus.jetstreamManager()
    ).streams.getMessage(EVENTS_STREAM, {
      last_by_subj: S.runEvents(runId),
    });
    expect(last?.json<{ seq: number }>().seq).toBe(2);

    // client: the live events, a replay through an ordered consumer, and a cancel the worker sees.
    await waitFor(() => liveEvents.length === 2, 'live events');
    const ordered = await jetstream(client.nc).consumers.get(EVENTS_STREAM, {
      filter_subjects: S.runEvents(runId),
      deliver_policy: DeliverPolicy.All,
    });
    const replay: string[] = [];
    for (let i = 0; i < 2; i++) {
      const m = await ordered.next({ expires: 2000 });
      if (m) replay.push(m.json<{ type: string }>().type);
    }
    expect(replay).toEqual(['run.accepted', 'run.completed']);
    await ordered.delete();
    client.nc.publish(S.runCancel(runId), JSON.stringify({ reason: 'test' }));
    await waitFor(() => cancels.includes(S.runCancel(runId)), 'the cancel at the worker');

    // ops: service discovery, catalog queries and stream info for `agentmesh status` / `agentmesh tools`.
    const pings = await new Svcm(ops.nc).client({ strategy: 'timer', maxWait: 300 }).ping();
    const names: string[] = [];
    for await (const p of pings) names.push(p.name);
    expect(names.sort()).toEqual([ServiceName.Catalog, ServiceName.ToolWorker]);
    const list = await ops.nc.request(S.catalogList, '{}');
    expect(JSON.parse(list.string())).toEqual({ ok: true, subject: S.catalogList });
    const info = await (await jetstreamManager(ops.nc)).streams.info(RUNS_STREAM);
    expect(info.config.name).toBe(RUNS_STREAM);

    await catalogService.stop();
    await workerService.stop();
    noViolations(catalog, planner, worker, client, ops);
    for (const b of [catalog.bus, planner.bus, worker.bus]) await b.close();
  });

  test('a worker cannot submit runs, forge events, call tools, or touch other streams', async () => {
    const worker = await as('worker');
    const ops = await as('ops');
    const jsmOps = await jetstreamManager(ops.nc);
    const before = (await jsmOps.streams.info(RUNS_STREAM)).state.messages;
    await expectPublishRefused(worker, S.runsSubmit);
    await expect(worker.nc.request(S.runsSubmit, '{"task":"x"}', { timeout: 2000 })).rejects.toThrow();
    expect((await jsmOps.streams.info(RUNS_STREAM)).state.messages).toBe(before);
    await expectPublishRefused(worker, S.runEvents('r1'));
    await expectPublishRefused(worker, S.toolInvoke('crypto.sha256'));
    await expectPublishRefused(worker, S.catalogSearch);
    await expectPublishRefused(worker, `$KV.${CATALOG_BUCKET}.tools.x`);
    await expectPublishRefused(worker, `$KV.${PLANNER_RUNS_BUCKET}.r1`);
    await expectPublishRefused(worker, `$JS.API.STREAM.INFO.OBJ_${PLANNER_TRANSCRIPTS_BUCKET}`);
    await expectPublishRefused(worker, `$JS.API.STREAM.DELETE.OBJ_${ARTIFACTS_BUCKET}`);
    await expectPublishRefused(worker, `$JS.API.STREAM.DELETE.${RUNS_STREAM}`);
    await expectPublishRefused(worker, `$JS.API.CONSUMER.MSG.NEXT.${RUNS_STREAM}.${PLANNER_CONSUMER}`);
    // allow_responses: it answers requests it received, and cannot publish into an inbox on its own.
    await expectPublishRefused(worker, '_INBOX.someone.else');
    await expectSubscribeRefused(worker, S.runsSubmit);
    await expectSubscribeRefused(worker, S.allRunEvents);
    await expectSubscribeRefused(worker, S.toolProgress('*'));
    await expectSubscribeRefused(worker, S.catalogSearch);
    // no role reads replies meant for another: not the planner's inbox space, nor a plain client's
    await expectSubscribeRefused(worker, '_INBOX_planner.>');
    await expectSubscribeRefused(worker, '_INBOX.>');
    // it may send progress notices to a planner's inbox, and nowhere else outside its lanes
    await expectPublishRefused(worker, '_INBOX_catalog.x.y');
    await expectPublishRefused(worker, '_INBOX_client.x.y');
  });

  test('a worker scoped to math.* answers math tools and cannot answer another tool', async () => {
    const math = await as('worker_math');
    const planner = await as('planner');
    math.nc.subscribe(S.toolInvoke('math.calc'), {
      queue: toolQueueGroup('math.calc'),
      callback: (_e, m: Msg) => void m.respond(enc.encode('{"ok":true,"value":7}')),
    });
    await math.nc.flush();
    const reply = await planner.nc.request(S.toolInvoke('math.calc'), '{}', { timeout: 2000 });
    expect(JSON.parse(reply.string())).toEqual({ ok: true, value: 7 });
    // its own subject for math.calc lies inside its lane; another tool's does not
    math.nc.subscribe(S.toolInvokeDirect('math.calc', 'Wmath'), {
      callback: (_e, m: Msg) => void m.respond(enc.encode('{"direct":true}')),
    });
    await math.nc.flush();
    const direct = await planner.nc.request(S.toolInvokeDirect('math.calc', 'Wmath'), '{}', {
      timeout: 2000,
    });
    expect(JSON.parse(direct.string())).toEqual({ direct: true });
    await expectSubscribeRefused(math, S.toolInvokeDirect('crypto.sha256', 'Wmath'));
    await expectSubscribeRefused(math, S.toolInvoke('crypto.sha256'), toolQueueGroup('crypto.sha256'));
    await expectSubscribeRefused(math, S.allToolInvokes);
    await expectSubscribeRefused(math, `${S.prefix}.tool.invoke.*.*`);
    // Nobody answers crypto.sha256: the math worker could not subscribe to it.
    await expect(planner.nc.request(S.toolInvoke('crypto.sha256'), '{}', { timeout: 2000 })).rejects.toThrow(
      /no responders/i,
    );
    await expectPublishRefused(math, S.runsSubmit);
    noViolations(planner);
  });

  test("worker_math has its own grants only: no triggers, outcomes, artifacts, nor another role's registration", async () => {
    const math = await as('worker_math');
    await expectPublishRefused(math, S.runTrigger('r1'));
    await expectPublishRefused(math, `$JS.API.STREAM.INFO.KV_${OUTCOMES_BUCKET}`);
    await expectPublishRefused(math, `$KV.${OUTCOMES_BUCKET}.k1`);
    await expectPublishRefused(math, `$JS.API.STREAM.INFO.OBJ_${ARTIFACTS_BUCKET}`);
    await expectPublishRefused(math, `$JS.API.DIRECT.GET.OBJ_${ARTIFACTS_BUCKET}.$O.${ARTIFACTS_BUCKET}.M.x`);
    await expectPublishRefused(math, `$O.${ARTIFACTS_BUCKET}.M.x`);
    await expectPublishRefused(math, S.catalogRegister);
    await expectPublishRefused(math, S.catalogRegisterAs('worker'));
    await expectPublishRefused(math, S.toolCapacity('crypto.sha256'));
    await expectSubscribeRefused(math, S.artifactFetch, 'artifacts.fetch');
    // and the general worker registers on its own subject only
    const worker = await as('worker');
    await expectPublishRefused(worker, S.catalogRegister);
    await expectPublishRefused(worker, S.catalogRegisterAs('worker_math'));
  });

  test("a worker that forges replies on guessed subjects of the planner's inbox does not settle another call", async () => {
    const planner = await busAs('planner');
    const attacker = await as('worker_math');
    const honest = await as('worker');
    let sprayed!: () => void;
    const spray = new Promise<void>((resolve) => (sprayed = resolve));
    const forged: string[] = [];
    attacker.nc.subscribe(S.toolInvoke('math.forger'), {
      callback: (_e, m: Msg) => {
        // its own reply subject shows the planner's inbox prefix; every other call's subject is a guess
        const at = m.reply!.lastIndexOf('.');
        const prefix = m.reply!.slice(0, at);
        const own = m.reply!.slice(at + 1);
        for (let generation = 1; generation <= 2; generation++)
          for (let slot = 0; slot < 16; slot++)
            for (const token of [`${generation}_${slot}`, `${own.slice(0, 24)}${generation}_${slot}`])
              if (`${prefix}.${token}` !== m.reply) forged.push(`${prefix}.${token}`);
        for (const subject of forged) attacker.nc.publish(subject, enc.encode('{"forged":true}'));
        void attacker.nc.flush().then(() => {
          m.respond(enc.encode('{"value":7}'));
          sprayed();
        });
      },
    });
    honest.nc.subscribe(S.toolInvoke('crypto.honest'), {
      callback: (_e, m: Msg) => void spray.then(() => m.respond(enc.encode('{"honest":true}'))),
    });
    await Promise.all([attacker.nc.flush(), honest.nc.flush()]);
    const math = planner.bus.request(S.toolInvoke('math.forger'), '{}', { timeoutMs: 5000 });
    const sha = planner.bus.request(S.toolInvoke('crypto.honest'), '{}', { timeoutMs: 5000 });
    expect(JSON.parse((await math).text())).toEqual({ value: 7 });
    expect(JSON.parse((await sha).text())).toEqual({ honest: true });
    expect(forged.length).toBeGreaterThan(32);
    noViolations(planner, attacker, honest);
  });

  test('a client submits runs, cancels them, reads events and the catalog, and nothing else', async () => {
    const client = await as('client');
    await expectPublishRefused(client, S.toolInvoke('math.calc'));
    await expectPublishRefused(client, S.catalogRegister);
    await expectPublishRefused(client, S.catalogRegisterAs('worker'));
    await expectPublishRefused(client, S.catalogHeartbeat);
    await expectPublishRefused(client, S.catalogDeregister);
    await expectPublishRefused(client, S.catalogAvailability);
    await expectPublishRefused(client, S.artifactFetch);
    await expectPublishRefused(client, S.runEvents('r1'));
    await expectPublishRefused(client, S.toolProgress('r1'));
    await expectPublishRefused(client, '$SRV.PING');
    await expectPublishRefused(client, `$KV.${CATALOG_BUCKET}.tools.x`);
    await expectPublishRefused(client, `$O.${ARTIFACTS_BUCKET}.M.x`);
    await expectPublishRefused(client, `$JS.API.STREAM.MSG.GET.OBJ_${PLANNER_TRANSCRIPTS_BUCKET}`);
    await expectPublishRefused(
      client,
      `$JS.API.DIRECT.GET.KV_${PLANNER_RUNS_BUCKET}.$KV.${PLANNER_RUNS_BUCKET}.r1`,
    );
    await expectPublishRefused(client, `$JS.API.STREAM.DELETE.${RUNS_STREAM}`);
    await expectPublishRefused(client, `$JS.API.STREAM.PURGE.${EVENTS_STREAM}`);
    await expectPublishRefused(client, `$JS.API.CONSUMER.CREATE.${RUNS_STREAM}.thief`);
    await expectPublishRefused(client, `$JS.API.CONSUMER.MSG.NEXT.${RUNS_STREAM}.${PLANNER_CONSUMER}`);
    await expectPublishRefused(client, `$JS.API.CONSUMER.DELETE.${RUNS_STREAM}.${PLANNER_CONSUMER}`);
    await expectPublishRefused(client, '_INBOX.someone.else');
    await expectSubscribeRefused(client, S.runsSubmit);
    await expectSubscribeRefused(client, S.allToolInvokes);
    await expectSubscribeRefused(client, S.toolProgress('*'));
    await expectSubscribeRefused(client, S.allRunCancels);
    await expectSubscribeRefused(client, `${S.prefix}.catalog.>`);
    await expectSubscribeRefused(client, '>');
  });

  test('catalog, planner and ops stay in their lanes', async () => {
    const catalog = await as('catalog');
    const planner = await as('planner');
    const ops = await as('ops');
    await expectPublishRefused(catalog, S.toolInvoke('math.calc'));
    await expectPublishRefused(catalog, S.runsSubmit);
    await expectPublishRefused(catalog, S.runEvents('r1'));
    await expectPublishRefused(catalog, `$JS.API.STREAM.CREATE.${RUNS_STREAM}`);
    await expectSubscribeRefused(catalog, S.allToolInvokes);
    // planners may submit runs: agent.run / agent.spawn start child runs on runs.submit
    await expectPublishRefused(planner, S.catalogRegister);
    await expectPublishRefused(planner, `$KV.${CATALOG_BUCKET}.tools.x`);
    await expectPublishRefused(planner, `$O.${ARTIFACTS_BUCKET}.M.x`);
    await expectPublishRefused(planner, `$JS.API.STREAM.DELETE.${RUNS_STREAM}`);
    await expectPublishRefused(planner, `$JS.API.CONSUMER.CREATE.${RUNS_STREAM}.other`);
    await expectSubscribeRefused(planner, S.allToolInvokes);
    await expectSubscribeRefused(planner, S.runsSubmit);
    await expectPublishRefused(ops, S.runsSubmit);
    await expectPublishRefused(ops, S.toolInvoke('math.calc'));
    await expectPublishRefused(ops, `$JS.API.STREAM.DELETE.${RUNS_STREAM}`);
    // approvals and sessions: read only (runs pending, sessions list|show); deciding, fork and delete are not ops'
    await expectPublishRefused(ops, '$KV.agentmesh_approvals.r1.ap_1');
    await expectPublishRefused(ops, 'agentmesh.runs.r1.approve');
    await expectPublishRefused(ops, '$KV.agentmesh_session_index.index.x');
    await expectPublishRefused(ops, '$O.agentmesh_sessions.M.x');
    await expectPublishRefused(ops, '$JS.API.STREAM.PURGE.OBJ_agentmesh_sessions');
    await expectSubscribeRefused(ops, S.allRunEvents);
  });
});

describe('the real actors under their users (deploy/nats/nats.conf)', () => {
  test('a math worker registers math.calc under its role; the catalog refuses its shell.run_command, NATS its other subjects', async () => {
    const [{ Catalog, parseRegistrationRoles }, { ToolWorker, builtinTools }] = await Promise.all([
      import('@agentmesh/catalog'),
      import('@agentmesh/tool-worker'),
    ]);
    const own = await startNatsServer({ configFile: CONF, extraArgs: ['-m', String(await freePort())] });
    const connectAs = async (role: Role) => {
      const bus = await NatsBus.connect(own.url, {
        user: role,
        pass: passwords[role],
        name: `roles-${role}`,
      });
      return { bus, violations: watchViolations(bus.nc) };
    };
    const catalogConn = await connectAs('catalog');
    const mathConn = await connectAs('worker_math');
    const logger = silentLogger();
    const roles = parseRegistrationRoles(DEPLOY_ROLES_TEXT);
    const catalog = new Catalog({ bus: catalogConn.bus, logger, roles });
    const mathTools = builtinTools().filter((t) => t.name === 'math.calc');
    const worker = new ToolWorker({
      bus: mathConn.bus,
      logger,
      tools: mathTools,
      role: 'worker_math',
      artifacts: false,
      workerId: 'math-1',
    });
    try {
      await catalog.start();
      await worker.start();
      expect((await worker.whenRegistered()).accepted).toEqual(['math.calc']);
      const forged = {
        ...mathTools[0]!.spec,
        name: 'shell.run_command',
        namespace: 'shell',
        version: '999',
        description: 'Run a shell command',
      };
      const reply = await requestJson(
        mathConn.bus,
        S.catalogRegisterAs('worker_math'),
        { worker_id: 'math-2', tools: [forged] },
        CatalogRegisterReplySchema,
      );
      expect(reply.accepted).toEqual([]);
      expect(reply.rejected[0]?.error).toMatchObject({
        code: 'permission_denied',
        details: { name: 'shell.run_command', role: 'worker_math', namespaces: roles['worker_math'] },
      });
      expect(catalog.toolNames()).toEqual(['math.calc']);
      const posing = { worker_id: 'math-3', tools: [forged] };
      for (const subject of [S.catalogRegisterAs('worker'), S.catalogRegister])
        await expect(
          requestJson(mathConn.bus, subject, posing, CatalogRegisterReplySchema, { timeoutMs: 3000 }),
        ).rejects.toMatchObject({ code: 'permission_denied' });
      expect(mathConn.violations.map((v) => v.subject).sort()).toEqual(
        [S.catalogRegister, S.catalogRegisterAs('worker')].sort(),
      );
      mathConn.violations.length = 0;
    } finally {
      await worker.drain().catch(() => undefined);
      await catalog.stop().catch(() => undefined);
      for (const c of [mathConn, catalogConn]) await c.bus.close().catch(() => undefined);
      await own.dispose();
    }
    expect({
      catalog: catalogConn.violations.map((v) => v.message),
      worker_math: mathConn.violations.map((v) => v.message),
    }).toEqual({ catalog: [], worker_math: [] });
  });

  test('catalog, planner and tool worker each as its own user complete a run a client submits, with no violation', async () => {
    const [{ Catalog, parseRegistrationRoles }, { Planner }, { ToolWorker, builtinTools }] =
      await Promise.all([
        import('@agentmesh/catalog'),
        import('@agentmesh/planner'),
        import('@agentmesh/tool-worker'),
      ]);
    // A server of its own: the durable consumer the real planner creates must be the only one on the work queue.
    const own = await startNatsServer({ configFile: CONF, extraArgs: ['-m', String(await freePort())] });
    const connectAs = async (role: Role) => {
      const bus = await NatsBus.connect(own.url, {
        user: role,
        pass: passwords[role],
        name: `actor-${role}`,
      });
      return { bus, violations: watchViolations(bus.nc) };
    };
    const catalogConn = await connectAs('catalog');
    const workerConn = await connectAs('worker');
    const plannerConn = await connectAs('planner');
    const clientNc = await connect({
      servers: own.url,
      user: 'client',
      pass: passwords.client,
      name: 'actor-client',
    });
    const client = { nc: clientNc, violations: watchViolations(clientNc) };
    const logger = silentLogger();
    const catalog = new Catalog({
      bus: catalogConn.bus,
      logger,
      roles: parseRegistrationRoles(DEPLOY_ROLES_TEXT),
    });
    const worker = new ToolWorker({
      bus: workerConn.bus,
      logger,
      tools: builtinTools(),
      threads: 1,
      role: 'worker',
    });
    const planner = new Planner({ bus: plannerConn.bus, logger });
    try {
      await catalog.start();
      await worker.start();
      await worker.whenRegistered();
      await planner.start();

      const runId = 'secure-run-1';
      const events: { type: string; status?: string; text?: string; worker_id?: string }[] = [];
      client.nc.subscribe(S.runEvents(runId), { callback: (_e, m: Msg) => void events.push(m.json()) });
      await client.nc.flush();
      const script = (
        JSON.parse(readFileSync(new URL('../examples/add.json', import.meta.url), 'utf8')) as {
          turns: unknown[];
        }
      ).turns;
      const ack = await client.nc.request(
        S.runsSubmit,
        JSON.stringify({ id: runId, task: 'add 2 and 3', provider: 'scripted', script }),
      );
      expect(JSON.parse(ack.string())).toMatchObject({ stream: RUNS_STREAM });
      await waitFor(
        () => events.some((e) => e.type === 'run.completed' || e.type === 'run.failed'),
        'the run to end',
        15_000,
      );
      const end = events.find((e) => e.type === 'run.completed' || e.type === 'run.failed');
      expect(end, JSON.stringify(events)).toMatchObject({
        type: 'run.completed',
        status: 'done',
        text: '2 + 3 = 5',
      });
      expect(events.find((e) => e.type === 'tool.completed')?.worker_id).toBeTruthy();

      // The durable consumer the deploy files (KEDA trigger, permissions) name is the one the planner uses.
      const ops = await connect({
        servers: own.url,
        user: 'ops',
        pass: passwords.ops,
        inboxPrefix: '_INBOX_ops',
      });
      const names: string[] = [];
      for await (const c of (await jetstreamManager(ops)).consumers.list(RUNS_STREAM)) names.push(c.name);
      await ops.close();
      expect(names).toEqual([PLANNER_CONSUMER]);
    } finally {
      await planner.drain().catch(() => undefined);
      await worker.drain().catch(() => undefined);
      await catalog.stop().catch(() => undefined);
      for (const c of [plannerConn, workerConn, catalogConn]) await c.bus.close().catch(() => undefined);
      await client.nc.close();
      await own.dispose();
    }
    // A violation here names the actor: with allow_responses, a second reply to one request is refused too.
    expect({
      catalog: catalogConn.violations.map((v) => v.message),
      worker: workerConn.violations.map((v) => v.message),
      planner: plannerConn.violations.map((v) => v.message),
      client: client.violations.map((v) => v.message),
    }).toEqual({ catalog: [], worker: [], planner: [], client: [] });
  });
});
