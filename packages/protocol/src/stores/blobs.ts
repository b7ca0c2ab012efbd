import type { ObjectStore } from '@nats-io/obj';

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
    if (i === null || i.deleted) return null;
    const { 'content-type': mime, ...meta } = i.metadata ?? {};
    return { name, size: i.size, mime: mime ?? 'application/octet-stream', meta };
  }
  async get(name: string): Promise<{ info: BlobInfo; data: Uint8Array } | null> {
    const info = await this.info(name);
    if (info === null) return null;
    const data = await this.os.getBlob(name);
    return data === null ? null : { info, data };
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
