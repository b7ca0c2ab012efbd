import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryBus, silentLogger, type RunEvent } from '@agentmesh/protocol';
import { startGateway, type Gateway } from './server.js';
import type { RunSource, StopFollow } from './source.js';

const EVENTS = 400;
const PAD = 'x'.repeat(64 * 1024);

/** A run of 400 events of 64 KiB each, all stored: a follow hands them over as fast as it is called. */
class BigRunSource implements RunSource {
  delivered = 0;
  follows = 0;

  event(seq: number): RunEvent {
    const ts = new Date().toISOString();
    if (seq === 1)
      return { type: 'run.accepted', run_id: 'big', seq, ts, task: 't', identity: { tenant: 'default' } };
    if (seq === EVENTS)
      return {
        type: 'run.completed',
        run_id: 'big',
        seq,
        ts,
        status: 'done',
        text: 'done',
        iterations: 1,
        tool_calls: 0,
        usage: { input_tokens: 0, output_tokens: 0 },
      };
    return { type: 'run.notice', run_id: 'big', seq, ts, kind: 'pad', message: PAD };
  }

  get(runId: string) {
    return Promise.resolve(
      runId === 'big' ? { run_id: 'big', tenant: 'default', task: 't', status: 'running' } : undefined,
    );
  }

  list() {
    return Promise.resolve([]);
  }

  learn(): void {}

  tenant(runId: string) {
    return Promise.resolve(runId === 'big' ? 'default' : undefined);
  }

  /** Like the event log's follower: events arrive one at a time after the call, until stopped. */
  follow(_runId: string, fromSeq: number, onEvent: (event: RunEvent) => void): Promise<StopFollow> {
    this.follows++;
    let stopped = false;
    const deliver = (seq: number) => {
      if (stopped || seq > EVENTS) return;
      this.delivered++;
      onEvent(this.event(seq));
      setImmediate(() => deliver(seq + 1));
    };
    setImmediate(() => deliver(fromSeq));
    return Promise.resolve(() => {
      stopped = true;
      return Promise.resolve();
    });
  }
}

let gateway: Gateway | undefined;
afterEach(async () => gateway?.close());

describe('gateway stream backpressure', () => {
  it('stops reading the run while a client does not read, and sends every event once when it does', async () => {
    const source = new BigRunSource();
    gateway = await startGateway({
      bus: new MemoryBus({ logger: silentLogger() }),
      prefix: 'agentmesh',
      source,
      logger: silentLogger(),
      keys: new Map(),
      port: 0,
    });
    const { port } = new URL(gateway.url);
    const res = await new Promise<import('node:http').IncomingMessage>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path: '/v1/runs/big/events' }, resolve);
      req.on('error', reject);
      req.end();
    });
    res.pause();
    let seen = -1;
    while (source.delivered !== seen) {
      seen = source.delivered;
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    const whileStalled = source.delivered;
    expect(whileStalled * PAD.length).toBeLessThan(16 * 1024 * 1024);
    let text = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => (text += chunk));
    res.resume();
    await new Promise((resolve) => res.on('end', resolve));
    const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(ids).toEqual(Array.from({ length: EVENTS }, (_v, i) => i + 1));
    expect(source.follows).toBeGreaterThan(1);
  });
});
