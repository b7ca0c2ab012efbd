import { describe, expect, it } from 'vitest';
import { createProgress } from './progress.js';

function sink(isTTY: boolean) {
  const writes: string[] = [];
  return { out: { isTTY, write: (t: string) => void writes.push(t) }, writes };
}

describe('eval progress', () => {
  it('redraws a bar in place on a terminal and clears it at the end', () => {
    const { out, writes } = sink(true);
    const progress = createProgress(out, 4);
    progress.tick(true);
    progress.tick(false);
    expect(writes.at(-1)).toBe(`\r[${'#'.repeat(15)}${'.'.repeat(15)}] 2/4 runs, 1 failed\u001b[K`);
    expect(writes.every((w) => !w.includes('\n'))).toBe(true);
    progress.done();
    expect(writes.at(-1)).toBe('\r\u001b[K');
  });

  it('prints a plain line every tenth of the work elsewhere, and the last one', () => {
    const { out, writes } = sink(false);
    const progress = createProgress(out, 25);
    for (let i = 0; i < 25; i++) progress.tick(i !== 3);
    expect(writes.every((w) => !w.includes('\r') && w.endsWith('\n'))).toBe(true);
    expect(writes).toHaveLength(10);
    expect(writes[0]).toBe('eval: 3/25 runs, 0 failed\n');
    expect(writes.at(-1)).toBe('eval: 25/25 runs, 1 failed\n');
    progress.done();
    expect(writes).toHaveLength(10);
  });
});
