import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';

export type CommandStatus = 'running' | 'exited' | 'timed_out' | 'killed' | 'failed_to_start';
export type CommandStream = 'stdout' | 'stderr';

const KILL_GRACE_MS = 2_000;

/** Output of one stream, keeping at most `capacity` of the most recent bytes; offsets count every byte ever written. */
export class OutputBuffer {
  private chunks: Buffer[] = [];
  private keptBytes = 0;
  /** Bytes written since the start, kept or not. */
  total = 0;
  /** Bytes dropped from the front to stay within capacity. */
  dropped = 0;

  constructor(private readonly capacity: number) {}

  append(chunk: Buffer): void {
    this.total += chunk.length;
    this.chunks.push(chunk);
    this.keptBytes += chunk.length;
    while (this.keptBytes > this.capacity && this.chunks.length > 0) {
      const first = this.chunks[0] as Buffer;
      const excess = this.keptBytes - this.capacity;
      if (first.length <= excess) {
        this.chunks.shift();
        this.keptBytes -= first.length;
        this.dropped += first.length;
      } else {
        this.chunks[0] = first.subarray(excess);
        this.keptBytes -= excess;
        this.dropped += excess;
      }
    }
  }

  /** Bytes from absolute offset `start` (clamped to what is kept), at most `max`. */
  read(start: number, max: number): { data: Buffer; start: number } {
    const from = Math.max(start, this.dropped);
    if (from >= this.total || max <= 0) return { data: Buffer.alloc(0), start: Math.min(from, this.total) };
    const all = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks);
    if (this.chunks.length > 1) this.chunks = [all];
    const local = from - this.dropped;
    return { data: all.subarray(local, local + max), start: from };
  }
}

export interface StartCommandOptions {
  file: string;
  args: readonly string[];
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
  tenant: string;
  /** Shown back to the model; argv or the shell string. */
  display: readonly string[];
}

/** One started command: its process, buffered output and final state. */
export class CommandHandle {
  readonly id = `cmd_${randomUUID()}`;
  readonly startedAt = Date.now();
  readonly stdout: OutputBuffer;
  readonly stderr: OutputBuffer;
  status: CommandStatus = 'running';
  exitCode: number | null = null;
  signal: string | null = null;
  finishedAt: number | undefined;
  startError: string | undefined;
  readonly done: Promise<void>;
  private readonly listeners = new Set<() => void>();
  private child: ChildProcess | undefined;
  private timer: NodeJS.Timeout | undefined;
  private endReason: CommandStatus | undefined;

  constructor(
    readonly tenant: string,
    readonly display: readonly string[],
    bufferBytes: number,
    private readonly onFinish: (handle: CommandHandle) => void,
  ) {
    this.stdout = new OutputBuffer(bufferBytes);
    this.stderr = new OutputBuffer(bufferBytes);
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
  }

  private resolveDone: () => void = () => undefined;

  private finish(status: CommandStatus): void {
    if (this.status !== 'running') return;
    this.status = status;
    this.finishedAt = Date.now();
    if (this.timer) clearTimeout(this.timer);
    this.onFinish(this);
    this.resolveDone();
    this.notify();
  }

  /** Spawns the process; resolves once it started (or failed to). */
  start(options: StartCommandOptions): Promise<void> {
    return new Promise((resolve) => {
      let child: ChildProcess;
      try {
        child = spawn(options.file, [...options.args], {
          cwd: options.cwd,
          env: options.env,
          stdio: ['ignore', 'pipe', 'pipe'],
          detached: true,
          shell: false,
          windowsHide: true,
        });
      } catch (error) {
        this.startError = (error as Error).message;
        this.finish('failed_to_start');
        resolve();
        return;
      }
      this.child = child;
      child.stdout?.on('data', (chunk: Buffer) => {
        this.stdout.append(chunk);
        this.notify();
      });
      child.stderr?.on('data', (chunk: Buffer) => {
        this.stderr.append(chunk);
        this.notify();
      });
      child.once('spawn', () => {
        this.timer = setTimeout(() => this.kill('timed_out'), options.timeoutMs);
        this.timer.unref();
        resolve();
      });
      child.once('error', (error: NodeJS.ErrnoException) => {
        if (child.pid === undefined) {
          this.startError =
            error.code === 'ENOENT'
              ? `program ${JSON.stringify(options.file)} was not found on PATH`
              : error.message;
          this.finish('failed_to_start');
          resolve();
        }
      });
      child.once('close', (code, signal) => {
        this.exitCode = code;
        this.signal = signal;
        this.finish(this.endReason ?? 'exited');
      });
    });
  }

  /** Stops the process group: SIGTERM, then SIGKILL after a grace period. */
  kill(reason: 'timed_out' | 'killed'): void {
    const child = this.child;
    if (this.status !== 'running' || child?.pid === undefined) return;
    this.endReason ??= reason;
    const pid = child.pid;
    const signalGroup = (sig: NodeJS.Signals): void => {
      try {
        process.kill(-pid, sig);
      } catch {
        child.kill(sig);
      }
    };
    signalGroup('SIGTERM');
    const hard = setTimeout(() => {
      if (this.status === 'running') signalGroup('SIGKILL');
    }, KILL_GRACE_MS);
    hard.unref();
  }

  /** SIGKILLs the process group at once (used when the worker process exits). */
  killNow(): void {
    const pid = this.child?.pid;
    if (this.status !== 'running' || pid === undefined) return;
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }

  /** Resolves on the next output or state change, or after `ms`, or when `signal` aborts. */
  waitForChange(ms: number, signal?: AbortSignal): Promise<void> {
    if (this.status !== 'running' || ms <= 0 || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.listeners.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.listeners.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }

  elapsedMs(): number {
    return (this.finishedAt ?? Date.now()) - this.startedAt;
  }
}

/**
 * The command handles of one workspace pack instance: running commands and the most recent finished ones, each
 * visible only to the tenant that started it.
 */
export class CommandStore {
  private readonly handles = new Map<string, CommandHandle>();
  private running = 0;
  private closed = false;
  /** Installed on `process` only while commands run: kills their process groups if the worker exits first. */
  private readonly killOnExit = (): void => {
    for (const handle of this.handles.values()) handle.killNow();
  };

  constructor(private readonly limits: { maxRunning: number; maxKept: number; bufferBytes: number }) {}

  /** Starts a command; `busy` when too many already run in this pack. */
  async start(options: StartCommandOptions): Promise<CommandHandle> {
    if (this.closed) throw new AgentMeshError(ErrorCode.Closed, 'the workspace tools are shut down');
    if (this.running >= this.limits.maxRunning) {
      throw new AgentMeshError(
        ErrorCode.Busy,
        `${this.running} commands are already running in this workspace; wait for one to finish (shell.read_command_output with wait_ms) and try again`,
        { retryable: true },
      );
    }
    if (this.running++ === 0) process.on('exit', this.killOnExit);
    const handle = new CommandHandle(options.tenant, options.display, this.limits.bufferBytes, () => {
      if (--this.running === 0) process.off('exit', this.killOnExit);
      this.evictFinished();
    });
    this.handles.set(handle.id, handle);
    await handle.start(options);
    return handle;
  }

  /** The handle `id` if `tenant` started it; `not_found` otherwise (another tenant's handle looks absent). */
  get(id: string, tenant: string): CommandHandle {
    const handle = this.handles.get(id);
    if (handle === undefined || handle.tenant !== tenant) {
      throw new AgentMeshError(
        ErrorCode.NotFound,
        `no command handle ${JSON.stringify(id)}; handles come from shell.run_command and only the most recent ${this.limits.maxKept} finished ones are kept`,
        { details: { handle: id } },
      );
    }
    return handle;
  }

  private evictFinished(): void {
    const finished = [...this.handles.values()].filter((h) => h.status !== 'running');
    let excess = finished.length - this.limits.maxKept;
    for (const handle of finished) {
      if (excess <= 0) break;
      this.handles.delete(handle.id);
      excess--;
    }
  }

  /** Kills every running command and forgets all handles. */
  async close(): Promise<void> {
    this.closed = true;
    const running = [...this.handles.values()].filter((h) => h.status === 'running');
    for (const handle of running) handle.kill('killed');
    await Promise.all(running.map((h) => h.done));
    this.handles.clear();
  }
}
