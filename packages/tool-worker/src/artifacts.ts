import { randomUUID } from 'node:crypto';
import {
  AgentMeshError,
  ErrorCode,
  decodeText,
  type ArtifactFetchReply,
  type ArtifactRef,
  type BlobStore,
} from '@agentmesh/protocol';

/** artifact_fetch reads at most this much per call, whatever it asks for. */
export const ARTIFACT_FETCH_MAX_BYTES = 1024 * 1024;

/** Where a tool keeps heavy outputs, scoped to the tenant of the call that made them. */
export interface ArtifactStore {
  /** Stores bytes or text and returns the ref a model can pass to `artifact_fetch`. */
  put(data: Uint8Array | string, options?: { mime?: string }): Promise<ArtifactRef>;
  /** Reads a slice of an artifact of this tenant; another tenant's ref answers `not_found`. */
  read(ref: string, options?: { offset?: number; maxBytes?: number }): Promise<ArtifactFetchReply>;
}

export interface ArtifactScope {
  tenant: string;
  runId?: string;
  callId?: string;
  tool?: string;
}

const encoder = new TextEncoder();

/** A tenant-scoped view of the artifacts bucket. */
export class TenantArtifacts implements ArtifactStore {
  constructor(
    private readonly blobs: BlobStore,
    private readonly scope: ArtifactScope,
  ) {}

  async put(data: Uint8Array | string, options: { mime?: string } = {}): Promise<ArtifactRef> {
    const bytes = typeof data === 'string' ? encoder.encode(data) : data;
    const mime =
      options.mime ?? (typeof data === 'string' ? 'text/plain; charset=utf-8' : 'application/octet-stream');
    const ref = `art-${randomUUID()}`;
    const meta: Record<string, string> = { tenant: this.scope.tenant };
    if (this.scope.runId !== undefined) meta['run_id'] = this.scope.runId;
    if (this.scope.callId !== undefined) meta['call_id'] = this.scope.callId;
    if (this.scope.tool !== undefined) meta['tool'] = this.scope.tool;
    await this.blobs.put(ref, bytes, { mime, meta });
    return { ref, mime, size: bytes.length };
  }

  async read(ref: string, options: { offset?: number; maxBytes?: number } = {}): Promise<ArtifactFetchReply> {
    const notFound = () =>
      new AgentMeshError(ErrorCode.NotFound, `artifact "${ref}" was not found`, {
        retryable: false,
        details: { ref },
      });
    const info = await this.blobs.info(ref);
    if (info === null || info.meta['tenant'] !== this.scope.tenant) throw notFound();
    const blob = await this.blobs.get(ref);
    if (blob === null) throw notFound();
    const offset = Math.min(Math.max(0, options.offset ?? 0), blob.data.length);
    const maxBytes = Math.min(Math.max(1, options.maxBytes ?? 65_536), ARTIFACT_FETCH_MAX_BYTES);
    const end = utf8Boundary(blob.data, Math.min(blob.data.length, offset + maxBytes), offset);
    return {
      ref,
      mime: blob.info.mime,
      size: blob.data.length,
      offset,
      text: decodeText(blob.data.subarray(offset, end)),
      eof: end >= blob.data.length,
    };
  }
}

/** Moves `end` back so that the slice does not cut a UTF-8 character in two (never below `start + 1`). */
export function utf8Boundary(bytes: Uint8Array, end: number, start = 0): number {
  let e = end;
  while (e > start + 1 && e < bytes.length && ((bytes[e] ?? 0) & 0xc0) === 0x80) e--;
  return e;
}
