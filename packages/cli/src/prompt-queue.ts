import { createInterface, type Interface } from 'node:readline';

/**
 * Questions on one terminal, one at a time: a single line reader over stdin, each question waits for the ones
 * before it and consumes exactly one answer line (two calls asking at once never share one "y").
 */
export class PromptQueue {
  private reader: Interface | undefined;
  private readonly lines: string[] = [];
  private readonly waiting: ((line: string | undefined) => void)[] = [];
  private ended = false;
  private tail: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly input: NodeJS.ReadableStream,
    private readonly output: { write(text: string): void },
  ) {}

  /** Asks after every earlier question was answered; resolves with the answer line (undefined at end of input). */
  ask(question: string): Promise<string | undefined> {
    const answer = this.tail.then(() => {
      this.output.write(question);
      return this.nextLine();
    });
    this.tail = answer.catch(() => undefined);
    return answer;
  }

  /** Asks a yes/no question; only "y" or "yes" is a yes. */
  async confirm(question: string): Promise<boolean> {
    const answer = await this.ask(`${question} [y/N] `);
    return answer !== undefined && /^y(es)?$/i.test(answer.trim());
  }

  close(): void {
    this.reader?.close();
    this.reader = undefined;
  }

  private nextLine(): Promise<string | undefined> {
    this.open();
    const line = this.lines.shift();
    if (line !== undefined) return Promise.resolve(line);
    if (this.ended) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private open(): void {
    if (this.reader !== undefined || this.ended) return;
    this.reader = createInterface({ input: this.input, terminal: false });
    this.reader.on('line', (line) => {
      const next = this.waiting.shift();
      if (next) next(line);
      else this.lines.push(line);
    });
    this.reader.on('close', () => {
      this.ended = true;
      for (const w of this.waiting.splice(0)) w(undefined);
    });
  }
}
