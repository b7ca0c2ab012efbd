import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { PromptQueue } from './prompt-queue.js';

function terminal() {
  const stdin = Object.assign(new PassThrough(), { isTTY: true });
  const shown: string[] = [];
  return { stdin, shown, queue: new PromptQueue(stdin, { write: (t) => void shown.push(t) }) };
}

describe('PromptQueue: one prompt per call, each consuming its own answer', () => {
  it('one "y" answers one of two calls asking at once; the second waits for its own line', async () => {
    const { stdin, shown, queue } = terminal();
    const first = queue.confirm('fs.write_file a.txt. Allow?');
    const second = queue.confirm('fs.write_file b.txt. Allow?');
    let secondSettled = false;
    void second.then(() => (secondSettled = true));
    stdin.write('y\n');
    expect(await first).toBe(true);
    await new Promise((r) => setImmediate(r));
    expect(secondSettled).toBe(false);
    expect(shown).toEqual(['fs.write_file a.txt. Allow? [y/N] ', 'fs.write_file b.txt. Allow? [y/N] ']);
    stdin.write('n\n');
    expect(await second).toBe(false);
    queue.close();
  });

  it('answers typed ahead are used in order; the end of input answers no', async () => {
    const { stdin, queue } = terminal();
    stdin.end('yes\nn\n');
    const answers = await Promise.all([queue.confirm('a?'), queue.confirm('b?'), queue.confirm('c?')]);
    expect(answers).toEqual([true, false, false]);
  });
});
