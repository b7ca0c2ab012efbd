import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { NatsBus } from '../bus/nats-bus.js';
import type { KvEntry } from './kv.js';

/**
 * A watch that is told which entries its watcher holds (`known`) gets entries without their values and reads only
 * the others. A watcher may answer with a promise for a write still in flight: the watch waits for it, in order.
 */
let bus: NatsBus;
const bucket = `kvwatch${process.pid}`;
const text = (value: Uint8Array) => new TextDecoder().decode(value);
const bytes = (value: string) => new TextEncoder().encode(value);

beforeAll(async () => {
  bus = await NatsBus.connect(inject('natsUrl'));
});
afterAll(async () => {
  const jsm = await bus.jetstreamManager();
  await jsm.streams.delete(`KV_${bucket}`).catch(() => undefined);
  await bus.close();
});

describe('KV watch with known entries on NATS', () => {
  it('waits on a promised answer: true delivers the entry unread, false reads its value; later entries wait', async () => {
    const kv = await bus.kv(bucket);
    const reads: string[] = [];
    const subs = [`$JS.API.DIRECT.GET.KV_${bucket}`, `$JS.API.DIRECT.GET.KV_${bucket}.>`].map((subject) =>
      bus.subscribe(subject, (msg) => void reads.push(msg.subject)),
    );
    await bus.flush();
    const seen: KvEntry[] = [];
    const answers = new Map<string, (held: boolean) => void>();
    const watcher = await kv.watch((entry) => seen.push(entry), {
      updatesOnly: true,
      known: (key) => new Promise<boolean>((resolve) => answers.set(key, resolve)),
    });
    try {
      await kv.put('mine', bytes('one'));
      await kv.put('theirs', bytes('two'));
      await expect.poll(() => answers.has('mine')).toBe(true);
      await bus.flush();
      expect(answers.has('theirs')).toBe(false);
      expect(seen).toEqual([]);
      answers.get('mine')!(true);
      await expect.poll(() => answers.has('theirs')).toBe(true);
      answers.get('theirs')!(false);
      await expect.poll(() => seen.length).toBe(2);
      expect(seen.map((e) => [e.key, e.revision, text(e.value)])).toEqual([
        ['mine', 1, ''],
        ['theirs', 2, 'two'],
      ]);
      // the read's copy may reach this subscription after the read's answer reached the watch
      await expect.poll(() => reads.length).toBe(1);
      await bus.flush();
      expect(reads).toHaveLength(1);
    } finally {
      watcher.stop();
      for (const sub of subs) sub.unsubscribe();
    }
  });
});
