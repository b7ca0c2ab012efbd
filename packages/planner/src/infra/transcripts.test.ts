import { describe, expect, it } from 'vitest';
import { settledTranscript } from './transcripts.js';

/** A store whose transcript appears on the `at`-th read. */
function appearing(at: number) {
  let reads = 0;
  return {
    read: () => Promise.resolve(++reads >= at ? { run_id: 'r' } : null),
    get reads() {
      return reads;
    },
  };
}

describe('settledTranscript', () => {
  it('waits for the transcript of a run whose final event is stored already', async () => {
    const store = appearing(3);
    expect(await settledTranscript(store.read, () => Promise.resolve(true))).toEqual({ run_id: 'r' });
    expect(store.reads).toBe(3);
  });

  it('answers null at once for a run that has not ended', async () => {
    const store = appearing(3);
    expect(await settledTranscript(store.read, () => Promise.resolve(false))).toBeNull();
    expect(store.reads).toBe(1);
  });
});
