import type { ObjectInfo, ObjectResult, ObjectStore } from '@nats-io/obj';
import { AgentMeshError, ErrorCode } from '../errors.js';
import { sleep } from '../timing.js';

export interface BlobInfo {
  name: string;
  size: number;
  mime: string;
  meta: Record<string, string>;
}

/** Large binary objects (artifacts): a JetStream object store on NATS, memory in process. */
export interface BlobStore {
  put(
    name: string,
    data: Uint8Array,
    info: { mime: string; meta?: Record<string, string> },
  ): Promise<BlobInfo>;
  info(name: string): Promise<BlobInfo | null>;
  get(name: string): Promise<{ info: BlobInfo; data: Uint8Array } | null>;
  delete(name: string): Promise<void>;
}

export interface BlobBucketOptions {
  /** Blobs older than this are dropped (the object store's max age on NATS). */
  ttlMs?: number;
  /**
   * In-process stores only: past this many bytes in all, the oldest blobs are dropped, so that a long-lived process
   * does not keep every blob it ever stored. NATS object stores keep theirs on disk and ignore it.
   */
  memoryMaxBytes?: number;
}

/** How often a blob read checks that the object was not written again meanwhile. */
const REPLACED_CHECK_MS = 250;
/** Reads of a blob replaced each time before a read gives up (`unavailable`, retryable). */
const REPLACED_READ_ATTEMPTS = 5;

function blobInfo(name: string, i: ObjectInfo): BlobInfo {
  const { 'content-type': mime, ...meta } = i.metadata ?? {};
  return { name, size: i.size, mime: mime ?? 'application/octet-stream', meta };
}

async function readAll(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    size += value.length;
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** A blob store on a JetStream object store. */
export class NatsBlobStore implements BlobStore {
  constructor(private readonly os: ObjectStore) {}
  async put(
    name: string,
    data: Uint8Array,
    info: { mime: string; meta?: Record<string, string> },
  ): Promise<BlobInfo> {
    const headers = { 'content-type': info.mime, ...info.meta };
    await this.os.putBlob({ name, description: info.mime, metadata: headers }, data);
    return { name, size: data.length, mime: info.mime, meta: info.meta ?? {} };
  }
  async info(name: string): Promise<BlobInfo | null> {
    const i = await this.os.info(name);
    return i === null || i.deleted ? null : blobInfo(name, i);
  }

  /**
   * The blob's bytes. A blob written again while it is read has its old chunks purged: the read would wait for them
   * forever, so it checks every {@link REPLACED_CHECK_MS} that the object is still the one it reads, and reads the
   * new one when it is not.
   */
  async get(name: string): Promise<{ info: BlobInfo; data: Uint8Array } | null> {
    for (let attempt = 1; ; attempt++) {
      const found = await this.os.get(name);
      if (found === null) return null;
      const data = await this.readUnlessReplaced(name, found);
      if (data !== undefined) return { info: blobInfo(name, found.info), data };
      if (attempt >= REPLACED_READ_ATTEMPTS)
        throw new AgentMeshError(
          ErrorCode.Unavailable,
          `blob "${name}" was written again while it was read, ${attempt} times in a row`,
          { retryable: true, details: { blob: name, attempts: attempt } },
        );
    }
  }

  /** The object's bytes, or undefined when it was replaced or deleted before its chunks all came. */
  private async readUnlessReplaced(name: string, found: ObjectResult): Promise<Uint8Array | undefined> {
    const reader = found.data.getReader();
    const reading = Promise.all([found.error, readAll(reader)]).then(([error, data]) => {
      if (error) throw error;
      return { data };
    });
    reading.catch(() => undefined);
    const ticks = new AbortController();
    try {
      for (;;) {
        const tick = sleep(REPLACED_CHECK_MS, ticks.signal).then(() => undefined);
        const done = await Promise.race([reading, tick]);
        if (done !== undefined) return done.data;
        const now = await this.os.info(name);
        if (now === null || now.deleted || now.nuid !== found.info.nuid) {
          await reader.cancel().catch(() => undefined);
          return undefined;
        }
      }
    } finally {
      ticks.abort();
    }
  }

  async delete(name: string): Promise<void> {
    await this.os.delete(name).catch(() => undefined);
  }
}

/**
 * An in-process blob store: blobs older than `ttlMs` are dropped like an object store's max age, and past
 * `memoryMaxBytes` the oldest blobs go first. Without either it keeps every blob.
 */
export class MemoryBlobStore implements BlobStore {
  /** In the order written (a blob written again moves to the end). */
  private readonly blobs = new Map<string, { info: BlobInfo; data: Uint8Array; at: number }>();
  private bytes = 0;
  private readonly ttlMs: number;
  private readonly maxBytes: number;

  constructor(options: BlobBucketOptions = {}) {
    this.ttlMs = options.ttlMs ?? 0;
    this.maxBytes = options.memoryMaxBytes ?? 0;
  }

  async put(
    name: string,
    data: Uint8Array,
    info: { mime: string; meta?: Record<string, string> },
  ): Promise<BlobInfo> {
    const i: BlobInfo = { name, size: data.length, mime: info.mime, meta: info.meta ?? {} };
    this.remove(name);
    const now = Date.now();
    this.blobs.set(name, { info: i, data, at: now });
    this.bytes += data.length;
    this.evict(now);
    return i;
  }
  async info(name: string): Promise<BlobInfo | null> {
    return this.live(name)?.info ?? null;
  }
  async get(name: string): Promise<{ info: BlobInfo; data: Uint8Array } | null> {
    const blob = this.live(name);
    return blob === undefined ? null : { info: blob.info, data: blob.data };
  }
  async delete(name: string): Promise<void> {
    this.remove(name);
  }

  private live(name: string): { info: BlobInfo; data: Uint8Array } | undefined {
    this.evict(Date.now());
    return this.blobs.get(name);
  }

  private remove(name: string): void {
    const blob = this.blobs.get(name);
    if (blob === undefined) return;
    this.blobs.delete(name);
    this.bytes -= blob.data.length;
  }

  /** Drops the oldest blobs while they are past their age or the store is past its size. */
  private evict(now: number): void {
    for (const [name, blob] of this.blobs) {
      const expired = this.ttlMs > 0 && now - blob.at > this.ttlMs;
      const over = this.maxBytes > 0 && this.bytes > this.maxBytes && this.blobs.size > 1;
      if (!expired && !over) return;
      this.remove(name);
    }
  }
}
