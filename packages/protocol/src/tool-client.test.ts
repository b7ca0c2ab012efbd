import { afterEach, describe, expect, it } from 'vitest';
import { MemoryBus } from './bus/memory-bus.js';
import type { BusMessage } from './bus/types.js';
import { ErrorCode, type AgentMeshError } from './errors.js';
import type { ToolInvocation, ToolOutcome } from './schemas.js';
import { invokeTool } from './tool-client.js';

const prefix = 'tc';
const buses: MemoryBus[] = [];
afterEach(async () => {
  for (const bus of buses.splice(0)) await bus.close();
});

/** What a replica answers when its shared outcome store cannot be read: it did not run the call. */
function storeUnavailable(invocation: ToolInvocation): ToolOutcome {
  const message = `the shared outcome store is unavailable, so worker w-1 did not run call ${invocation.call_id} of the non-idempotent tool "${invocation.tool}": timeout`;
  return {
    call_id: invocation.call_id,
    tool: invocation.tool,
    worker_id: 'w-1',
    is_error: true,
    error: { code: ErrorCode.Unavailable, message, retryable: true },
    preview: message,
    elapsed_ms: 0,
    attempts: 1,
    dedup: 'shared',
  };
}

function charged(invocation: ToolInvocation): ToolOutcome {
  return {
    call_id: invocation.call_id,
    tool: invocation.tool,
    worker_id: 'w-1',
    is_error: false,
    output: { charged: 5 },
    preview: '{"charged":5}',
    elapsed_ms: 1,
    attempts: 1,
    dedup: 'shared',
  };
}

/** A replica of `billing.charge` that answers each invocation it gets with the next of `answers` (the last repeats). */
function replica(answers: ((invocation: ToolInvocation) => ToolOutcome)[]) {
  const bus = new MemoryBus();
  buses.push(bus);
  const keys: (string | undefined)[] = [];
  bus.subscribe(`${prefix}.tool.invoke.billing.charge`, (msg: BusMessage) => {
    const invocation = (msg.value ?? JSON.parse(msg.text())) as ToolInvocation;
    keys.push(invocation.idempotency_key);
    const answer = answers[Math.min(keys.length, answers.length) - 1]!;
    bus.respond(msg, JSON.stringify(answer(invocation)));
  });
  return { bus, keys };
}

const charge = { call_id: 'c-1', run_id: 'run-1', tool: 'billing.charge', arguments: { amount: 5 } };

describe('invokeTool: a call a lost caller may have sent before', () => {
  it('without sentBefore, a replica that did not run the call is answered as it said', async () => {
    const { bus, keys } = replica([storeUnavailable]);
    const outcome = await invokeTool(bus, charge, { prefix, timeoutMs: 2_000 });
    expect(outcome).toMatchObject({
      is_error: true,
      error: { code: ErrorCode.Unavailable, retryable: true },
    });
    expect(outcome.preview).toContain('did not run');
    expect(keys).toHaveLength(1);
  });

  it('with sentBefore, asks again while the store cannot tell, and takes the answer once it can', async () => {
    const { bus, keys } = replica([storeUnavailable, storeUnavailable, charged]);
    const outcome = await invokeTool(bus, charge, { prefix, timeoutMs: 5_000, sentBefore: true });
    expect(outcome).toMatchObject({ is_error: false, output: { charged: 5 } });
    expect(keys).toEqual(['run-1:c-1', 'run-1:c-1', 'run-1:c-1']);
  });

  it('with sentBefore, fails as worker_lost (may have run) when the store never tells, never as "did not run"', async () => {
    const { bus, keys } = replica([storeUnavailable]);
    const error = (await invokeTool(bus, charge, { prefix, timeoutMs: 700, sentBefore: true }).catch(
      (e: unknown) => e,
    )) as AgentMeshError;
    expect(error).toMatchObject({ code: ErrorCode.WorkerLost, retryable: false });
    expect(error.message).toBe(
      'call c-1 of tool "billing.charge" was sent before by a caller that was lost; the tool is not idempotent ' +
        'and may have run, and its outcome store could not tell in time',
    );
    expect(error.message).not.toContain('did not run');
    expect(keys.length).toBeGreaterThan(1);
  });

  it('an idempotent call is answered as the replica said, sentBefore or not', async () => {
    const { bus, keys } = replica([storeUnavailable]);
    const outcome = await invokeTool(bus, charge, {
      prefix,
      timeoutMs: 2_000,
      sentBefore: true,
      idempotent: true,
    });
    expect(outcome).toMatchObject({ is_error: true, error: { code: ErrorCode.Unavailable } });
    expect(keys).toHaveLength(1);
  });
});
