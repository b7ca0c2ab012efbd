import { join, resolve } from 'node:path';
import {
  MemoryBus,
  type BlobBucketOptions,
  type BlobStore,
  type KvBucketOptions,
  type KvStore,
  type MemoryBusOptions,
} from '@agentmesh/protocol';
import {
  runsBucket,
  sessionIndexBucket,
  sessionsBucket,
  tenantUsageBucket,
  transcriptsBucket,
} from '@agentmesh/planner';
import { FileBlobStore, FileKvStore } from './file-stores.js';

/**
 * Where embedded runs keep sessions between processes: `--data-dir DIR`, else AGENTMESH_DATA_DIR, else
 * `.agentmesh` in the workspace (`--workspace`), else in the current folder. Sessions live in `<data dir>/sessions/`.
 */
export function embeddedDataDir(options: {
  dataDir?: string | undefined;
  workspace?: string | undefined;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}): string {
  const env = options.env ?? process.env;
  const given = options.dataDir ?? (env['AGENTMESH_DATA_DIR'] || undefined);
  if (given !== undefined) return resolve(given);
  return resolve(options.workspace ?? options.cwd ?? process.cwd(), '.agentmesh');
}

/**
 * The in-process bus of an embedded run, with the session buckets kept as files under `<dataDir>/sessions/`
 * (`transcripts/` for the session transcripts, `index/` for the session index and locks), so a second process that
 * opens the same data dir continues the same sessions, and the run records and run transcripts under
 * `<dataDir>/runs/` (`records/`, `transcripts/`), so a later process can fork a run (`agentmesh runs fork`). Tenants'
 * usage and submit counters are kept in `<dataDir>/tenants/`, so daily budgets hold across processes. Every other
 * bucket stays in memory.
 */
export class SessionFilesBus extends MemoryBus {
  private readonly files: { kv: Map<string, KvStore>; blobs: Map<string, BlobStore> };

  constructor(
    readonly dataDir: string,
    options: MemoryBusOptions & { prefix?: string } = {},
  ) {
    super(options);
    const root = join(dataDir, 'sessions');
    const runs = join(dataDir, 'runs');
    this.files = {
      kv: new Map([
        [sessionIndexBucket(options.prefix), new FileKvStore(join(root, 'index'))],
        [tenantUsageBucket(options.prefix), new FileKvStore(join(dataDir, 'tenants'))],
        [runsBucket(options.prefix), new FileKvStore(join(runs, 'records'))],
      ]),
      blobs: new Map([
        [sessionsBucket(options.prefix), new FileBlobStore(join(root, 'transcripts'))],
        [transcriptsBucket(options.prefix), new FileBlobStore(join(runs, 'transcripts'))],
      ]),
    };
  }

  override kv(bucket: string, options?: KvBucketOptions): Promise<KvStore> {
    const file = this.files.kv.get(bucket);
    return file === undefined ? super.kv(bucket, options) : Promise.resolve(file);
  }

  override blobs(bucket: string, options?: BlobBucketOptions): Promise<BlobStore> {
    const file = this.files.blobs.get(bucket);
    return file === undefined ? super.blobs(bucket, options) : Promise.resolve(file);
  }
}
