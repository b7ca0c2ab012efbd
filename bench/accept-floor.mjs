// The floor of submit -> run.accepted: the same durable steps done with bare nats.js and nothing else. A submitter
// publishes the request to a file-backed work-queue stream (message id set, PubAck awaited); a bare "planner" on its
// own connection pulls it one at a time (its next pull issued at once, as the planner's intake does), creates the
// run's key in a KV bucket (the run-once record) and appends one event with a message id and an expected last
// subject sequence to a file-backed events stream; the submitter hears that event on a core subscription. No
// parsing, validation, lease, event log or run: what is left between this and the planner's figure is agentmesh's.
import { connect } from '@nats-io/transport-node';
import { AckPolicy, RetentionPolicy, StorageType, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { measure } from './lib.mjs';

const record = new TextEncoder().encode('{"state":"running"}');
const event = new TextEncoder().encode('{"type":"run.accepted","seq":1}');
const finished = new TextEncoder().encode('{"state":"finished","status":"done"}');

/**
 * Sets the bare chain up; `measure(options)` times submits through it (see lib.mjs `measure`), `stop()` removes its
 * streams. Kept open, so that blocks of it can alternate with blocks of the planner's figure. With `tail`, each taken
 * request then ends as a durable run ends after its last event: its record is updated to finished (compare-and-set),
 * then the request is acked with a confirmation; the submitter's next submit overlaps that end.
 */
export async function bareAcceptChain(natsUrl, prefix, payload, { tail = false } = {}) {
  const p = `${prefix}_floor${tail ? '_tail' : ''}`;
  const submitter = await connect({ servers: natsUrl, noAsyncTraces: true });
  const taker = await connect({ servers: natsUrl, noAsyncTraces: true });
  const jsm = await jetstreamManager(taker);
  const streams = [`${p}_RUNS`, `${p}_EVENTS`, `KV_${p}_records`];
  await jsm.streams.add({
    name: streams[0],
    subjects: [`${p}.runs`],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
  });
  await jsm.streams.add({ name: streams[1], subjects: [`${p}.events.>`], storage: StorageType.File });
  await jsm.consumers.add(streams[0], { durable_name: 'taker', ack_policy: AckPolicy.Explicit });
  const kv = await new Kvm(taker).create(`${p}_records`, { history: 1 });
  const js = jetstream(taker);
  const consumer = await js.consumers.get(streams[0], 'taker');
  const stopped = new AbortController();
  const take = async (m) => {
    const id = m.headers?.get('Nats-Msg-Id') ?? String(m.seq);
    const revision = await kv.create(id, record);
    await js.publish(`${p}.events.${id}`, event, { msgID: `${id}:1`, expect: { lastSubjectSequence: 0 } });
    if (!tail) return m.ack();
    // the durable ordering of a run's end, after its last event: the record says finished, then the request is acked
    await kv.update(id, finished, revision);
    await m.ackAck();
  };
  const taking = (async () => {
    while (!stopped.signal.aborted) {
      const batch = await consumer.fetch({ max_messages: 1, expires: 1000 });
      const first = await batch[Symbol.asyncIterator]().next();
      setImmediate(() => batch.stop());
      if (first.done !== true) void take(first.value);
    }
  })();
  const heard = new Map();
  submitter.subscribe(`${p}.events.>`, { callback: (_e, m) => heard.get(m.subject)?.() });
  await submitter.flush();
  const submitterJs = jetstream(submitter);
  let n = 0;
  const submit = async () => {
    const id = `floor-${++n}`;
    const accepted = new Promise((resolve) => heard.set(`${p}.events.${id}`, resolve));
    await submitterJs.publish(`${p}.runs`, payload, { msgID: id });
    await accepted;
    heard.delete(`${p}.events.${id}`);
  };
  return {
    measure: (options) => measure(submit, options),
    async stop() {
      stopped.abort();
      await taking;
      for (const s of streams) await jsm.streams.delete(s).catch(() => undefined);
      await Promise.all([submitter.close(), taker.close()]);
    },
  };
}
