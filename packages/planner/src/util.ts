import {
  AgentMeshError,
  ErrorCode,
  compileGlobTokens,
  type GlobTest,
  type Logger,
} from '@agentmesh/protocol';

/** Resolves after `ms`, or rejects with `cancelled` when the signal aborts first. */
export function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new AgentMeshError(ErrorCode.Cancelled, 'aborted'));
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(new AgentMeshError(ErrorCode.Cancelled, 'aborted'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** A counting semaphore for bounding concurrent work. */
export class Semaphore {
  private available: number;
  private readonly waiters: (() => void)[] = [];
  constructor(permits: number) {
    this.available = permits;
  }
  async acquire(): Promise<() => void> {
    if (this.available > 0) this.available--;
    else await new Promise<void>((resolve) => this.waiters.push(resolve));
    return this.releaser();
  }

  /** Permits free now. */
  get free(): number {
    return this.available;
  }

  /** A permit now, or undefined when none is free (never waits). */
  tryAcquire(): (() => void) | undefined {
    if (this.available <= 0) return undefined;
    this.available--;
    return this.releaser();
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiters.shift();
      if (next) next();
      else this.available++;
    };
  }
}

/** JSON with object keys sorted, so equal values give equal strings (loop detection). */
export function stableStringify(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'undefined';
  if (Array.isArray(value)) return `[${value.map(stableStringify).join(',')}]`;
  // keys in code-unit order, as `a < b` compares them; built in one string (every tool call of a run passes here)
  const record = value as Record<string, unknown>;
  let out = '{';
  for (const key of Object.keys(record).sort()) {
    const member = record[key];
    if (member === undefined) continue;
    out += `${out.length === 1 ? '' : ','}${JSON.stringify(key)}:${stableStringify(member)}`;
  }
  return `${out}}`;
}

/** Compiled model globs (they come from configuration and price tables: a few hundred at most). */
const modelGlobs = new Map<string, GlobTest>();

/**
 * Matches a model id against a glob where `*` matches any run of characters (case-insensitive), without
 * backtracking: a request's model id, however long, costs at most its length times the glob's.
 */
export function modelGlobMatches(glob: string, model: string): boolean {
  let test = modelGlobs.get(glob);
  if (test === undefined) {
    test = compileGlobTokens(
      glob
        .toLowerCase()
        .split(/(\*)/)
        .map((part) => (part === '*' ? { kind: 'star' } : { kind: 'literal', text: part })),
    );
    if (modelGlobs.size >= 1024) modelGlobs.clear();
    modelGlobs.set(glob, test);
  }
  return test(model.toLowerCase());
}

/** Cuts text to at most `maxBytes` UTF-8 bytes, with a visible notice when it had to. */
export function capText(text: string, maxBytes: number): string {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= maxBytes) return text;
  const notice = `\n[agentmesh: output truncated from ${bytes} to ${maxBytes} bytes]`;
  const keep = Buffer.from(text, 'utf8').subarray(0, Math.max(0, maxBytes - Buffer.byteLength(notice)));
  return keep.toString('utf8').replace(/\uFFFD+$/, '') + notice;
}

let lastIsoMs = -1;
let lastIso = '';

/** `new Date().toISOString()`, formatted once per millisecond (events are stamped many times a millisecond). */
export function isoNow(): string {
  const ms = Date.now();
  if (ms !== lastIsoMs) {
    lastIsoMs = ms;
    lastIso = new Date(ms).toISOString();
  }
  return lastIso;
}

/** A map that keeps at most `capacity` entries, dropping the least recently used one to make room. */
export class LruCache<K, V> {
  private readonly entries = new Map<K, V>();

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError(`an LRU cache holds at least one entry, got capacity ${capacity}`);
  }

  get size(): number {
    return this.entries.size;
  }

  /** The entry for `key`, made the most recently used; `create` makes it when absent. */
  getOrCreate(key: K, create: () => V): V {
    const found = this.entries.get(key);
    if (found !== undefined || this.entries.has(key)) {
      this.entries.delete(key);
      this.entries.set(key, found as V);
      return found as V;
    }
    const value = create();
    this.entries.set(key, value);
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value as K);
    return value;
  }
}

const LOG_LEVELS: ReadonlySet<string> = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal']);
const ignoreLog = (): void => undefined;

/**
 * `logger.child(bindings)`, made on first use: a run's child logger costs its serialized bindings, and most runs
 * that go well log nothing through it until after their first event is sent. A call at a level the parent does not
 * log makes no child. Methods are bound once per value, so `log.info === log.info`.
 */
export function lazyChild(logger: Logger, bindings: Record<string, unknown>): Logger {
  let child: Logger | undefined;
  const bound = new Map<PropertyKey, { value: unknown; fn: unknown }>();
  const real = () => (child ??= logger.child(bindings));
  // an empty target: the parent's own properties put no invariant on what the child answers
  return new Proxy({} as Logger, {
    get: (_target, key) => {
      if (
        child === undefined &&
        typeof key === 'string' &&
        LOG_LEVELS.has(key) &&
        !logger.isLevelEnabled(key)
      )
        return ignoreLog;
      const target = real();
      const value: unknown = Reflect.get(target, key, target);
      if (typeof value !== 'function') return value;
      const known = bound.get(key);
      if (known?.value === value) return known.fn;
      const fn = (value as (...a: unknown[]) => unknown).bind(target);
      bound.set(key, { value, fn });
      return fn;
    },
    set: (_target, key, value) => Reflect.set(real(), key, value),
  });
}
