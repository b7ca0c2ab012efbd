import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ErrorCode, encodeJson, type KvEntry } from '@agentmesh/protocol';
import { FileBlobStore, FileKvStore } from './file-stores.js';

const text = (value: Uint8Array) => new TextDecoder().decode(value);
const bytes = (value: string) => new TextEncoder().encode(value);

describe('FileKvStore', () => {
  it('shares keys between stores on one folder, with compare-and-set', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'file-kv-'));
    const a = new FileKvStore(dir);
    const b = new FileKvStore(dir);
    const rev = await a.create('lock.x', bytes('one'));
    await expect(b.create('lock.x', bytes('two'))).rejects.toMatchObject({ code: ErrorCode.Conflict });
    const seen = await b.get('lock.x');
    expect(text(seen!.value)).toBe('one');
    expect(seen!.revision).toBe(rev);
    const rev2 = await b.update('lock.x', bytes('three'), rev);
    expect(rev2).toBeGreaterThan(rev);
    await expect(a.update('lock.x', bytes('stale'), rev)).rejects.toMatchObject({ code: ErrorCode.Conflict });
    await a.put('index.t.s1', bytes('1'));
    expect((await b.keys('index.t.>')).sort()).toEqual(['index.t.s1']);
    await b.delete('lock.x');
    expect(await a.get('lock.x')).toBeNull();
    expect(readdirSync(dir).filter((n) => n.endsWith('.tmp') || n.endsWith('.lock'))).toEqual([]);
  });

  it('lets exactly one of many racing creates win', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'file-kv-'));
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) => new FileKvStore(dir).create('k', bytes(String(i)))),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
  });

  it('tells a watcher about a change made through another store on the folder', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'file-kv-'));
    let resolve!: (entry: KvEntry) => void;
    const changed = new Promise<KvEntry>((r) => (resolve = r));
    const watcher = await new FileKvStore(dir).watch((entry) => resolve(entry), {
      key: 'session.x',
      updatesOnly: true,
    });
    await new FileKvStore(dir).put('session.x', bytes('v'));
    expect(text((await changed).value)).toBe('v');
    watcher.stop();
  });

  it('names a corrupt key file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'file-kv-'));
    writeFileSync(join(dir, 'k.json'), '{"revision": 1');
    await expect(new FileKvStore(dir).get('k')).rejects.toThrow(join(dir, 'k.json'));
  });
});

describe('FileBlobStore', () => {
  it('keeps JSON blobs readable on disk and gives the same value back', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'file-blobs-'));
    const store = new FileBlobStore(dir);
    const value = { session: 's', messages: [{ role: 'user', content: 'hi' }] };
    await store.put('sessions/dGVuYW50/s', encodeJson(value), { mime: 'application/json' });
    expect(JSON.parse(text((await new FileBlobStore(dir).get('sessions/dGVuYW50/s'))!.data))).toEqual(value);
    await store.put('bin', new Uint8Array([0, 255, 1]), { mime: 'application/octet-stream' });
    expect([...(await store.get('bin'))!.data]).toEqual([0, 255, 1]);
    await store.delete('bin');
    expect(await store.get('bin')).toBeNull();
  });
});
