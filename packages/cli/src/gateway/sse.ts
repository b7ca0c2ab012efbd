import type { IncomingMessage, ServerResponse } from 'node:http';
import { ErrorCode, TERMINAL_EVENT_TYPES, type Logger, type RunEvent } from '@agentmesh/protocol';
import type { StreamFormat, Translator } from './formats/index.js';
import { HttpError } from './http.js';
import type { RunSource, StopFollow } from './source.js';

/** How often an idle stream sends a comment, so proxies keep the connection open. */
export const KEEP_ALIVE_MS = 15_000;

export interface RunStreamOptions {
  source: RunSource;
  runId: string;
  /** The last seq the client has (`Last-Event-ID` or `?after=`): only later events are sent. */
  after: number;
  format: StreamFormat;
  logger: Logger;
  keepAliveMs?: number | undefined;
}

/** The resume point of a request: `Last-Event-ID` wins over `?after=`; anything but a whole number >= 0 is 400. */
export function resumePoint(req: IncomingMessage, url: URL): number {
  const header = req.headers['last-event-id'];
  const given = (typeof header === 'string' ? header : undefined) ?? url.searchParams.get('after') ?? '0';
  const after = Number(given);
  if (!Number.isSafeInteger(after) || after < 0)
    throw new HttpError(
      400,
      `the resume point (Last-Event-ID or ?after=) must be a whole number >= 0, got "${given}"`,
      ErrorCode.InvalidRequest,
    );
  return after;
}

/** SSE text for one event's frames: the `id:` goes on its last frame, so a reconnect never skips half an event. */
function encode(frames: unknown[], seq: number): string {
  return frames
    .map((frame, i) => {
      const data = typeof frame === 'string' ? frame : JSON.stringify(frame);
      return `${i === frames.length - 1 ? `id: ${seq}\n` : ''}data: ${data}\n\n`;
    })
    .join('');
}

/**
 * One client's stream of a run: the events after its resume point, then live ones, each once and in order, ending
 * after the run's final event. When the client reads slower than the run produces (the response buffer is full),
 * the follow on the event source is stopped and started again from the next seq once the buffer drains, so the
 * gateway holds at most about one buffer of events per client.
 */
export class RunStream {
  private next: number;
  private generation = 0;
  private stopFollow: StopFollow | undefined;
  private paused = false;
  private done = false;
  private readonly translator: Translator;
  private keepAlive: NodeJS.Timeout | undefined;

  constructor(
    private readonly res: ServerResponse,
    private readonly options: RunStreamOptions,
  ) {
    this.translator = options.format.create(options.runId);
    this.next = options.format.stateful ? 1 : Math.max(1, options.after);
  }

  async start(): Promise<void> {
    this.res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      ...this.options.format.headers,
    });
    this.res.flushHeaders();
    this.keepAlive = setInterval(
      () => this.res.write(': keep-alive\n\n'),
      this.options.keepAliveMs ?? KEEP_ALIVE_MS,
    );
    this.res.on('close', () => this.close());
    await this.follow();
  }

  private async follow(): Promise<void> {
    if (this.done) return;
    this.paused = false;
    const generation = ++this.generation;
    const stop = await this.options.source.follow(this.options.runId, this.next, (event) => {
      if (generation === this.generation) this.onEvent(event);
    });
    if (generation === this.generation && !this.paused && !this.done) this.stopFollow = stop;
    else await stop();
  }

  private onEvent(event: RunEvent): void {
    if (this.paused || this.done || event.seq < this.next) return;
    this.next = event.seq + 1;
    const frames = this.translator.frames(event);
    const written =
      event.seq > this.options.after && frames.length > 0 ? this.res.write(encode(frames, event.seq)) : true;
    if (TERMINAL_EVENT_TYPES.has(event.type)) return this.finish();
    if (!written) this.pause();
  }

  private pause(): void {
    this.paused = true;
    this.generation++;
    this.release();
    this.res.once('drain', () => {
      this.follow().catch((error: unknown) => this.fail(error));
    });
  }

  private finish(): void {
    const closing = this.translator.closing();
    for (const raw of closing) this.res.write(`data: ${raw}\n\n`);
    this.res.end();
    this.close();
  }

  private fail(error: unknown): void {
    this.options.logger.warn(
      { run_id: this.options.runId, err: (error as Error).message },
      'gateway stream stopped',
    );
    this.res.end();
    this.close();
  }

  private close(): void {
    if (this.done) return;
    this.done = true;
    this.generation++;
    clearInterval(this.keepAlive);
    this.release();
  }

  private release(): void {
    const stop = this.stopFollow;
    this.stopFollow = undefined;
    stop?.().catch(() => undefined);
  }
}
