import { describe, expect, it } from 'vitest';
import { encodeJson, memoryBackend, openRunIntake, subjects as buildSubjects } from '@agentmesh/protocol';
import { removeWaitingMessage } from './waiting-message.js';

const prefix = 'wm';
const subjects = buildSubjects(prefix);

/** A runs stream holding one submission, then waiting runs of tenants t and u, and one admitted run of t. */
async function queueWithRuns() {
  const queue = await openRunIntake(memoryBackend(), prefix);
  const submission = await queue.submit(encodeJson({ id: 'sub', task: 'x' }), { dedupeId: 'sub' });
  const put = (id: string, tenant: string, stage: number | 'admitted') =>
    queue.submit(encodeJson({ id, task: 'x' }), {
      dedupeId: `q-${id}`,
      subject: subjects.queuedRuns(tenant, stage),
    });
  await put('run-a', 't', 3);
  await put('run-b', 't', 3);
  await put('run-u', 'u', 3);
  await put('run-c', 't', 'admitted');
  await queue.submit(new TextEncoder().encode('not json'), {
    dedupeId: 'junk',
    subject: subjects.queuedRuns('t', 3),
  });
  const counts = async (tenant: string, stage: number | 'admitted') =>
    (
      await queue.consumer(`c-${tenant}-${stage}`, {
        ackWaitMs: 30_000,
        filterSubject: subjects.queuedRuns(tenant, stage),
      })
    ).counts();
  return { queue, from: submission.seq, counts };
}

describe('removing a cancelled waiting run from its tenant queue', () => {
  it('deletes the message of the run on its tenant and priority, leaving every other run', async () => {
    const { queue, from, counts } = await queueWithRuns();
    expect(
      await removeWaitingMessage(queue, subjects, 'run-b', { tenant: 't', priority: 3, submitSeq: from }),
    ).toBe(true);
    expect(await counts('t', 3)).toEqual({ pending: 2, ackPending: 0 });
    expect(await counts('t', 'admitted')).toEqual({ pending: 1, ackPending: 0 });
    expect(await counts('u', 3)).toEqual({ pending: 1, ackPending: 0 });
  });

  it('finds a promoted run on the admitted subject of its tenant', async () => {
    const { queue, from, counts } = await queueWithRuns();
    expect(
      await removeWaitingMessage(queue, subjects, 'run-c', { tenant: 't', priority: 3, submitSeq: from }),
    ).toBe(true);
    expect(await counts('t', 'admitted')).toEqual({ pending: 0, ackPending: 0 });
    expect(await counts('t', 3)).toEqual({ pending: 3, ackPending: 0 });
  });

  it('removes nothing for an older event, a stale seq, another tenant or another priority', async () => {
    const { queue, from, counts } = await queueWithRuns();
    const cases = [
      { runId: 'run-a', place: { tenant: 't', priority: 3, submitSeq: undefined } },
      { runId: 'run-a', place: { tenant: 't', priority: 3, submitSeq: from + 100 } },
      { runId: 'run-a', place: { tenant: 'u', priority: 3, submitSeq: from } },
      { runId: 'run-u', place: { tenant: 't', priority: 3, submitSeq: from } },
      { runId: 'run-a', place: { tenant: 't', priority: 2, submitSeq: from } },
      { runId: 'nobody', place: { tenant: 't', priority: 3, submitSeq: 1 } },
    ];
    for (const { runId, place } of cases)
      expect(await removeWaitingMessage(queue, subjects, runId, place)).toBe(false);
    expect(await counts('t', 3)).toEqual({ pending: 3, ackPending: 0 });
    expect(await counts('t', 'admitted')).toEqual({ pending: 1, ackPending: 0 });
    expect(await counts('u', 3)).toEqual({ pending: 1, ackPending: 0 });
  });
});
