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
  ttlMs?: number;
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

export class MemoryBlobStore implements BlobStore {
  private readonly blobs = new Map<string, { info: BlobInfo; data: Uint8Array }>();
  async put(
    name: string,
    data: Uint8Array,
    info: { mime: string; meta?: Record<string, string> },
  ): Promise<BlobInfo> {
    const i: BlobInfo = { name, size: data.length, mime: info.mime, meta: info.meta ?? {} };
    this.blobs.set(name, { info: i, data });
    return i;
  }
  async info(name: string): Promise<BlobInfo | null> {
    return this.blobs.get(name)?.info ?? null;
  }
  async get(name: string): Promise<{ info: BlobInfo; data: Uint8Array } | null> {
    return this.blobs.get(name) ?? null;
  }
  async delete(name: string): Promise<void> {
    this.blobs.delete(name);
  }
}
