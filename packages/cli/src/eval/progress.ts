/** Where progress goes: stderr, a bar redrawn in place on a TTY, otherwise a plain line every tenth of the work. */
export interface ProgressOutput {
  write(text: string): void;
  isTTY?: boolean;
}

const BAR_WIDTH = 30;

export interface Progress {
  /** One more run finished. */
  tick(passed: boolean): void;
  /** Clears the bar (a TTY) so the report starts on a clean line. */
  done(): void;
}

export function createProgress(out: ProgressOutput, total: number): Progress {
  let finished = 0;
  let failed = 0;
  let lastStep = 0;
  const tty = out.isTTY === true;
  const status = () => `${finished}/${total} run${total === 1 ? '' : 's'}, ${failed} failed`;
  const draw = () => {
    const filled = total === 0 ? BAR_WIDTH : Math.round((finished / total) * BAR_WIDTH);
    out.write(`\r[${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}] ${status()}\u001b[K`);
  };
  if (tty && total > 0) draw();
  return {
    tick(passed) {
      finished++;
      if (!passed) failed++;
      if (tty) return draw();
      const step = Math.floor((finished / total) * 10);
      if (step > lastStep || finished === total) {
        lastStep = step;
        out.write(`eval: ${status()}\n`);
      }
    },
    done() {
      if (tty && total > 0) out.write('\r\u001b[K');
    },
  };
}
