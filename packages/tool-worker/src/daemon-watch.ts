import { existsSync, realpathSync, watch, type FSWatcher } from 'node:fs';
import { realpath } from 'node:fs/promises';
import path from 'node:path';
import {
  DaemonWatchSchema,
  decodeMessage,
  requestJson,
  retry,
  subjects,
  type Bus,
  type BusMessage,
  type DaemonWatch,
  type Logger,
  type Subscription,
} from '@agentmesh/protocol';
import { z } from 'zod';
import { compileGlob, type GlobMatcher } from './packs/workspace/glob.js';

/** Options of a worker's daemon path watcher (`watchRoot` of the worker: its workspace). */
export interface DaemonPathWatcherOptions {
  bus: Bus;
  prefix: string;
  /** The workspace root; nothing outside it, and nothing under `.agentmesh/`, is ever watched or reported. */
  root: string;
  logger: Logger;
  /** Quiet time after the last change before one `file_changed` trigger goes out (default 500 ms). */
  debounceMs?: number;
}

/** Paths named in one `file_changed` trigger at most. */
export const MAX_CHANGED_PATHS = 200;
const PROTECTED_DIR = '.agentmesh';

/**
 * Watches a workspace for the daemons that asked for it: planners announce `{run_id, paths, ttl_ms}` on
 * `daemons.watch`; for each run this keeps one recursive `fs.watch` of the root, matches changed paths against the
 * run's globs, and after `debounceMs` without a change sends one `{kind: "file_changed", paths}` trigger to
 * `runs.<run_id>.trigger`. A run's watch ends on `ttl_ms: 0` or when no announcement renews it in time.
 */
export class DaemonPathWatcher {
  private readonly runs = new Map<string, RunWatch>();
  private sub: Subscription | undefined;
  private realRoot: string | undefined;

  constructor(private readonly options: DaemonPathWatcherOptions) {}

  /** True while the worker watches paths for this run. */
  watching(runId: string): boolean {
    return this.runs.has(runId);
  }

  async start(): Promise<void> {
    this.realRoot = await realpath(this.options.root);
    this.sub = this.options.bus.subscribe(subjects(this.options.prefix).daemonWatch, (msg) =>
      this.onAnnouncement(msg),
    );
  }

  stop(): void {
    this.sub?.unsubscribe();
    for (const run of this.runs.values()) run.close();
    this.runs.clear();
  }

  private onAnnouncement(msg: BusMessage): void {
    let body: DaemonWatch;
    try {
      body = decodeMessage(DaemonWatchSchema, msg.data, 'daemon watch announcement');
    } catch (error) {
      this.options.logger.warn({ err: (error as Error).message }, 'daemon watch announcement refused');
      return;
    }
    const current = this.runs.get(body.run_id);
    if (body.ttl_ms === 0 || body.paths.length === 0) {
      current?.close();
      this.runs.delete(body.run_id);
      return;
    }
    if (current?.samePaths(body.paths)) return current.renew(body.ttl_ms);
    current?.close();
    try {
      const run = new RunWatch(body, this.realRoot!, {
        send: (paths) => this.send(body.run_id, paths),
        expired: () => this.runs.get(body.run_id) === run && this.runs.delete(body.run_id),
        logger: this.options.logger,
        debounceMs: this.options.debounceMs ?? 500,
      });
      this.runs.set(body.run_id, run);
      this.options.logger.info({ run_id: body.run_id, paths: body.paths }, 'watching paths for a daemon');
    } catch (error) {
      this.options.logger.warn({ run_id: body.run_id, err: (error as Error).message }, 'paths not watched');
    }
  }

  private async send(runId: string, paths: string[]): Promise<void> {
    const subject = subjects(this.options.prefix).runTrigger(runId);
    try {
      await retry(
        () =>
          requestJson(this.options.bus, subject, { kind: 'file_changed', paths }, z.unknown(), {
            timeoutMs: 5_000,
          }),
        { attempts: 3, retryable: (error) => error.retryable },
      );
      this.options.logger.info({ run_id: runId, paths: paths.length }, 'file_changed trigger sent');
    } catch (error) {
      this.options.logger.warn(
        { run_id: runId, err: (error as Error).message },
        'file_changed trigger not sent',
      );
    }
  }
}

/** One daemon's watch: a recursive fs watcher, its globs, the changes waiting for the debounce, its expiry. */
class RunWatch {
  private readonly globs: GlobMatcher[];
  private readonly watchers: FSWatcher[] = [];
  private readonly pending = new Set<string>();
  private debounce: NodeJS.Timeout | undefined;
  private expiry: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly body: DaemonWatch,
    private readonly root: string,
    private readonly hooks: {
      send: (paths: string[]) => Promise<void>;
      expired: () => void;
      logger: Logger;
      debounceMs: number;
    },
  ) {
    this.globs = body.paths.map((p) => compileGlob(p));
    for (const base of watchBases(root, body.paths)) {
      const watcher = watch(path.join(root, base), { recursive: true }, (_event, filename) => {
        if (filename !== null) void this.onChange(joinRelative(base, filename.toString()));
      });
      watcher.on('error', (error) => {
        hooks.logger.warn({ run_id: body.run_id, base, err: error.message }, 'path watch failed');
        watcher.close();
      });
      this.watchers.push(watcher);
    }
    this.renew(body.ttl_ms);
  }

  samePaths(paths: readonly string[]): boolean {
    return paths.length === this.body.paths.length && paths.every((p, i) => p === this.body.paths[i]);
  }

  renew(ttlMs: number): void {
    clearTimeout(this.expiry);
    this.expiry = setTimeout(() => {
      this.close();
      this.hooks.expired();
    }, ttlMs);
    this.expiry.unref();
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.expiry);
    clearTimeout(this.debounce);
    for (const watcher of this.watchers) watcher.close();
  }

  private async onChange(relative: string): Promise<void> {
    const segments = relative.split('/');
    if (path.isAbsolute(relative) || segments.includes('..') || segments[0] === PROTECTED_DIR) return;
    if (!this.globs.some((g) => g.matches(relative))) return;
    if (!(await insideRoot(this.root, relative)) || this.closed) return;
    if (this.pending.size < MAX_CHANGED_PATHS) this.pending.add(relative);
    clearTimeout(this.debounce);
    this.debounce = setTimeout(() => this.flush(), this.hooks.debounceMs);
  }

  private flush(): void {
    if (this.closed || this.pending.size === 0) return;
    const paths = [...this.pending].sort();
    this.pending.clear();
    void this.hooks.send(paths);
  }
}

/**
 * True when the changed path really lies inside the root: the path itself, or its directory when it no longer
 * exists (a deleted file). A symlink leading out of the workspace is not inside.
 */
async function insideRoot(root: string, relative: string): Promise<boolean> {
  const full = path.join(root, relative);
  const real = await realpath(full).catch(() => realpath(path.dirname(full)).catch(() => undefined));
  return real !== undefined && isInside(root, real);
}

/**
 * The directories to watch for some globs: each glob's literal leading directories (`src/**` -> `src`; a glob
 * without `/` matches at any depth -> the root), or the nearest one that exists; none nested in another. Watching
 * only these keeps the set-up cost (Node walks each watched tree) to what the daemon asked for.
 */
export function watchBases(root: string, globs: readonly string[]): string[] {
  const bases = globs.map((glob) => {
    const dirs = glob.replace(/^\.\//, '').split('/').slice(0, -1);
    const firstPattern = dirs.findIndex((s) => /[*?[{]/.test(s));
    const literal = firstPattern === -1 ? dirs : dirs.slice(0, firstPattern);
    while (literal.length > 0 && !existsSync(path.join(root, ...literal))) literal.pop();
    return literal.join('/');
  });
  const unique = [...new Set(bases)].sort();
  return unique.filter(
    (b) =>
      !unique.some((other) => other !== b && (other === '' || b.startsWith(`${other}/`))) &&
      isInside(root, realpathSync(path.join(root, b))),
  );
}

function isInside(root: string, real: string): boolean {
  return real === root || real.startsWith(`${root}${path.sep}`);
}

function joinRelative(base: string, filename: string): string {
  const relative = filename.split(path.sep).join('/');
  return base === '' ? relative : `${base}/${relative}`;
}
