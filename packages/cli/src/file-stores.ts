import { watch, type FSWatcher } from 'node:fs';
import { mkdir, open, readFile, readdir, rename, rm, stat } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import {
  AgentMeshError,
  ErrorCode,
  retry,
  subjectMatches,
  type BlobInfo,
  type BlobStore,
  type KvEntry,
  type KvStore,
  type KvWatcher,
} from '@agentmesh/protocol';

/** A lock file older than this belongs to a process that died holding it. */
const STALE_LOCK_MS = 10_000;

/** Writes `data` to `path` atomically: a temp file in the same folder, then a rename over the target. */
export async function writeFileAtomic(path: string, data: string | Uint8Array): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const handle = await open(temp, 'w');
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temp, path);
}

function corrupt(path: string, problem: string, cause?: unknown): AgentMeshError {
  return new AgentMeshError(
    ErrorCode.InvalidConfig,
    `the store file ${path} is corrupt (${problem}): fix or delete it`,
    { retryable: false, details: { path }, ...(cause === undefined ? {} : { cause }) },
  );
}

/** Reads and parses a JSON store file; undefined when it does not exist, a named `invalid_config` when corrupt. */
async function readJsonFile(path: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw corrupt(path, (error as Error).message, error);
  }
}

/** Holds `<path>.lock` (created exclusively) while `work` runs, so processes sharing the folder take turns. */
async function withFileLock<T>(path: string, work: () => Promise<T>): Promise<T> {
  const lock = `${path}.lock`;
  await mkdir(dirname(path), { recursive: true });
  const handle = await retry(
    async () => {
      try {
        return await open(lock, 'wx');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        const age = Date.now() - (await stat(lock).catch(() => ({ mtimeMs: Date.now() }))).mtimeMs;
        if (age > STALE_LOCK_MS) await rm(lock, { force: true });
        throw new AgentMeshError(ErrorCode.Conflict, `${lock} is held`, { retryable: true });
      }
    },
    { baseMs: 5, capMs: 200, timeoutMs: STALE_LOCK_MS * 2 },
  );
  try {
    return await work();
  } finally {
    await handle.close();
    await rm(lock, { force: true });
  }
}

function keyFile(dir: string, key: string): string {
  return join(dir, `${encodeURIComponent(key)}.json`);
}

interface StoredEntry {
  revision: number;
  value: string;
}

/**
 * A KV bucket kept as one JSON file per key in a folder, shared by every process that opens the folder: writes are
 * atomic (temp file + rename), create/update compare-and-set under a per-key lock file, and `watch` sees changes made
 * by other processes (fs.watch). No TTL: entries stay until deleted.
 */
export class FileKvStore implements KvStore {
  constructor(private readonly dir: string) {}

  private async read(key: string): Promise<KvEntry | null> {
    const path = keyFile(this.dir, key);
    const raw = (await readJsonFile(path)) as StoredEntry | undefined;
    if (raw === undefined) return null;
    if (typeof raw !== 'object' || typeof raw.revision !== 'number' || typeof raw.value !== 'string')
      throw corrupt(path, 'expected {"revision": number, "value": base64 string}');
    return { key, value: Buffer.from(raw.value, 'base64'), revision: raw.revision, operation: 'PUT' };
  }

  private write(key: string, value: Uint8Array, check: (current: KvEntry | null) => void): Promise<number> {
    const path = keyFile(this.dir, key);
    return withFileLock(path, async () => {
      const current = await this.read(key);
      check(current);
      const revision = Math.max((current?.revision ?? 0) + 1, Date.now() * 1000 + randomBytes(1)[0]!);
      const stored: StoredEntry = { revision, value: Buffer.from(value).toString('base64') };
      await writeFileAtomic(path, JSON.stringify(stored));
      return revision;
    });
  }

  get(key: string): Promise<KvEntry | null> {
    return this.read(key);
  }
  put(key: string, value: Uint8Array): Promise<number> {
    return this.write(key, value, () => undefined);
  }
  create(key: string, value: Uint8Array): Promise<number> {
    return this.write(key, value, (current) => {
      if (current !== null) throw conflict(key);
    });
  }
  update(key: string, value: Uint8Array, revision: number): Promise<number> {
    return this.write(key, value, (current) => {
      if (current?.revision !== revision) throw conflict(key);
    });
  }
  async delete(key: string): Promise<void> {
    const path = keyFile(this.dir, key);
    await withFileLock(path, () => rm(path, { force: true }));
  }
  async keys(filter?: string): Promise<string[]> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    return names
      .filter((n) => n.endsWith('.json'))
      .map((n) => decodeURIComponent(n.slice(0, -'.json'.length)))
      .filter((k) => filter === undefined || subjectMatches(filter, k));
  }
  async watch(
    onEntry: (entry: KvEntry) => void,
    options: { key?: string; updatesOnly?: boolean } = {},
  ): Promise<KvWatcher> {
    if (!options.updatesOnly)
      for (const key of await this.keys(options.key)) {
        const entry = await this.read(key);
        if (entry !== null) onEntry(entry);
      }
    await mkdir(this.dir, { recursive: true });
    const watcher: FSWatcher = watch(this.dir, (_event, name) => {
      if (name === null || !name.endsWith('.json')) return;
      const key = decodeURIComponent(name.slice(0, -'.json'.length));
      if (options.key !== undefined && !subjectMatches(options.key, key)) return;
      void this.read(key).then(
        (entry) => onEntry(entry ?? { key, value: new Uint8Array(0), revision: 0, operation: 'DEL' }),
        () => undefined,
      );
    });
    watcher.on('error', () => undefined);
    return { stop: () => watcher.close() };
  }
}

function conflict(key: string): AgentMeshError {
  return new AgentMeshError(ErrorCode.Conflict, `key "${key}" changed concurrently`, {
    retryable: true,
    details: { key },
  });
}

interface StoredBlob {
  info: BlobInfo;
  /** The data as JSON when it is JSON (readable on disk), else base64 in `base64`. */
  json?: unknown;
  base64?: string;
}

/**
 * A blob store kept as one JSON file per blob in a folder (a name's `/` become subfolders); JSON blobs are stored
 * readable. Writes are atomic (temp file + rename); a file that does not parse is a named `invalid_config`.
 */
export class FileBlobStore implements BlobStore {
  constructor(private readonly dir: string) {}

  private file(name: string): string {
    return join(this.dir, ...name.split('/').map((part) => encodeURIComponent(part))) + '.json';
  }

  async put(
    name: string,
    data: Uint8Array,
    info: { mime: string; meta?: Record<string, string> },
  ): Promise<BlobInfo> {
    const stored: BlobInfo = { name, size: data.length, mime: info.mime, meta: info.meta ?? {} };
    const body: StoredBlob = { info: stored };
    const text = Buffer.from(data).toString('utf8');
    try {
      if (!info.mime.includes('json')) throw new Error('not JSON');
      body.json = JSON.parse(text);
    } catch {
      body.base64 = Buffer.from(data).toString('base64');
    }
    await writeFileAtomic(this.file(name), `${JSON.stringify(body, null, 1)}\n`);
    return stored;
  }
  async info(name: string): Promise<BlobInfo | null> {
    return (await this.get(name))?.info ?? null;
  }
  async get(name: string): Promise<{ info: BlobInfo; data: Uint8Array } | null> {
    const path = this.file(name);
    const raw = (await readJsonFile(path)) as StoredBlob | undefined;
    if (raw === undefined) return null;
    if (
      typeof raw !== 'object' ||
      raw.info === undefined ||
      (raw.json === undefined && raw.base64 === undefined)
    )
      throw corrupt(path, 'expected {"info", "json" | "base64"}');
    const data =
      raw.base64 === undefined ? Buffer.from(JSON.stringify(raw.json)) : Buffer.from(raw.base64, 'base64');
    return { info: raw.info, data };
  }
  async delete(name: string): Promise<void> {
    await rm(this.file(name), { force: true });
  }
}
