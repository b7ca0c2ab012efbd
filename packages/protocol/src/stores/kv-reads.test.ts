import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { ErrorCode, isAgentMeshError } from '../errors.js';
import { NatsBus } from '../bus/nats-bus.js';

/**
 * Where a KV read goes on NATS. A direct get may be answered by any replica of a replicated bucket, one still behind
 * an acknowledged write included; `consistentReads` sends reads to the stream's leader (STREAM.MSG.GET). Seen here
 * on the JetStream API subjects a read is requested on.
 */
let bus: NatsBus;
const bucket = `kvreads${process.pid}`;

beforeAll(async () => {
  bus = await NatsBus.connect(inject('natsUrl'));
});
afterAll(async () => {
  await bus.close();
});

/**
 * The JetStream API subjects `read` requested on, for the bucket. A read makes one request; the server may hand its
 * copy to this subscription after the request's answer (the answer goes out from another of its goroutines), so the
 * copy is waited for, 5 s at most.
 */
async function requestedOn(read: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  let copied!: () => void;
  const copy = new Promise<void>((resolve) => (copied = resolve));
  const subs = [`$JS.API.DIRECT.GET.KV_${bucket}.>`, `$JS.API.STREAM.MSG.GET.KV_${bucket}`].map((subject) =>
    bus.subscribe(subject, (msg) => {
      seen.push(msg.subject);
      copied();
    }),
  );
  await bus.flush();
  await read();
  const timer = setTimeout(copied, 5_000);
  await copy;
  clearTimeout(timer);
  for (const sub of subs) sub.unsubscribe();
  return seen.map((s) => s.replace(`KV_${bucket}`, 'KV_b').replace(/\.\$KV\..*$/, '.$KV…'));
}

describe('KV reads on NATS', () => {
  it('are direct gets by default, and go to the stream leader with consistentReads; both read the value', async () => {
    const direct = await bus.kv(bucket);
    const consistent = await bus.kv(bucket, { consistentReads: true });
    await direct.create('k', new TextEncoder().encode('v1'));
    let got: string | undefined;
    expect(
      await requestedOn(async () => (got = new TextDecoder().decode((await direct.get('k'))!.value))),
    ).toEqual(['$JS.API.DIRECT.GET.KV_b.$KV…']);
    expect(got).toBe('v1');
    expect(
      await requestedOn(async () => (got = new TextDecoder().decode((await consistent.get('k'))!.value))),
    ).toEqual(['$JS.API.STREAM.MSG.GET.KV_b']);
    expect(got).toBe('v1');
    await consistent.delete('k');
    expect(await consistent.get('k')).toBeNull();
  });

  it('a create that fails for another reason than an existing key (its stream gone) is not taken for a conflict', async () => {
    const name = `kvgone${process.pid}`;
    const kv = await bus.kv(name);
    await kv.create('k', new TextEncoder().encode('v1'));
    const taken = await kv.create('k', new TextEncoder().encode('v2')).catch((e: unknown) => e);
    expect(isAgentMeshError(taken, ErrorCode.Conflict)).toBe(true);
    const jsm = await jetstreamManager(bus.nc);
    await jsm.streams.delete(`KV_${name}`);
    const created = await kv.create('other', new TextEncoder().encode('v')).catch((e: unknown) => e);
    expect(created).toBeInstanceOf(Error);
    expect(isAgentMeshError(created, ErrorCode.Conflict)).toBe(false);
  });
});
