import { describe, expect, it } from 'vitest';
import { MemoryBlobStore, MemoryKvStore, encodeJson, silentLogger } from '@agentmesh/protocol';
import { SessionHold } from './session-hold.js';
import { SessionStore } from './session-store.js';
import type { ChatMessage, ModelProvider } from '../providers/types.js';
import type { RunEventSink } from '../run/events.js';

const never = new AbortController().signal;
const say = (content: string): ChatMessage => ({ role: 'user', content });

async function setup() {
  const kv = new MemoryKvStore();
  const store = new SessionStore(new MemoryBlobStore(), kv);
  await store.appendRun('acme', 'chat', { run_id: 'r0', messages: [say('first')] });
  const hold = await SessionHold.open(store, { tenant: 'acme', session: 'chat', runId: 'ra' }, never);
  /** Another run takes the lock as if this run's had expired (its planner paused past the ttl). */
  const steal = async (runId: string) => {
    const [key] = await kv.keys('session.>');
    const entry = (await kv.get(key!))!;
    await kv.update(key!, encodeJson({ run_id: runId, expires_at: Date.now() + 60_000 }), entry.revision);
    return key!;
  };
  const release = async (key: string) => {
    const entry = (await kv.get(key))!;
    await kv.update(key, encodeJson({ run_id: '', expires_at: 0 }), entry.revision);
  };
  return { store, hold, steal, release };
}

const starting = (hold: SessionHold) =>
  hold.startingMessages({
    maxTokens: 1_000_000,
    provider: {} as ModelProvider,
    sink: {} as RunEventSink,
    signal: never,
    log: silentLogger(),
  });

describe('SessionHold whose lock expired', () => {
  it('adds its new turns after those of the run that continued the session meanwhile', async () => {
    const { store, hold, steal, release } = await setup();
    const start = await starting(hold);
    const key = await steal('rb');
    await store.appendRun('acme', 'chat', { run_id: 'rb', messages: [say('from b')] });
    await release(key);
    await hold.finish('ra', [...start, say('from a')]);
    const saved = await store.get('acme', 'chat');
    expect(saved?.runs).toEqual(['r0', 'rb', 'ra']);
    expect(saved?.messages.map((m) => m.content)).toEqual(['first', 'from b', 'from a']);
  });

  it('saves nothing while the other run still holds the lock, and says so', async () => {
    const { store, hold, steal } = await setup();
    const start = await starting(hold);
    await steal('rb');
    await store.appendRun('acme', 'chat', { run_id: 'rb', messages: [say('from b')] });
    await expect(hold.finish('ra', [...start, say('from a')])).rejects.toMatchObject({
      code: 'conflict',
      message: expect.stringContaining('another run holds it now') as string,
    });
    expect((await store.get('acme', 'chat'))?.runs).toEqual(['r0', 'rb']);
  });

  it('refuses to save a resumed run over another run, naming that run', async () => {
    const { store, hold, steal, release } = await setup();
    const key = await steal('rb');
    await store.appendRun('acme', 'chat', { run_id: 'rb', messages: [say('from b')] });
    await release(key);
    await expect(hold.finish('ra', [say('first'), say('from a')])).rejects.toMatchObject({
      code: 'conflict',
      message: expect.stringContaining('run rb continued it') as string,
    });
    expect((await store.get('acme', 'chat'))?.messages.map((m) => m.content)).toEqual(['first', 'from b']);
  });

  it('saves as usual when nobody saved while it had lost the lock', async () => {
    const { store, hold, steal, release } = await setup();
    const start = await starting(hold);
    await release(await steal('rb'));
    await hold.finish('ra', [...start, say('from a')]);
    const saved = await store.get('acme', 'chat');
    expect(saved?.runs).toEqual(['r0', 'ra']);
    expect(saved?.messages.map((m) => m.content)).toEqual(['first', 'from a']);
  });
});
