import type { JetStreamManager, StreamConfig, StreamInfo } from '@nats-io/jetstream';
import { AgentMeshError, ErrorCode } from '../errors.js';

/** The stream settings agentmesh chooses for an asset; every one is checked on an existing asset. */
export type WantedStream = Partial<StreamConfig> & { name: string };

const CHECKED: readonly (keyof StreamConfig)[] = [
  'num_replicas',
  'max_age',
  'duplicate_window',
  'max_msg_size',
  'max_bytes',
  'max_msgs_per_subject',
  'retention',
  'subjects',
];

/** Failures a cluster recovers from: a timeout, no responder, a lost connection, too few peers while a node is down. */
const TRANSIENT_API_ERROR =
  /timeout|timed out|no responders|connection (closed|draining)|disconnect|insufficient resources|no suitable peers/i;

/**
 * A failure of a NATS or JetStream operation as an {@link AgentMeshError} whose `retryable` says whether to try
 * again: a timeout, no responder or a closed connection (a leader election, a node going away) is `unavailable` and
 * retryable; anything else (a refused setting, a permissions violation) fails at once. An {@link AgentMeshError}
 * already says for itself and is kept as is.
 */
export function natsFailure(error: unknown): AgentMeshError {
  if (error instanceof AgentMeshError) return error;
  const e = AgentMeshError.from(error);
  if (!TRANSIENT_API_ERROR.test(e.message) || /permission/i.test(e.message)) return e;
  return new AgentMeshError(ErrorCode.Unavailable, e.message, { retryable: true, cause: error });
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function assetError(
  stream: string,
  setting: string,
  current: unknown,
  wanted: unknown,
  cause: unknown,
): AgentMeshError {
  const why = cause instanceof Error ? cause.message : String(cause);
  const transient = cause instanceof Error && natsFailure(cause).retryable;
  return new AgentMeshError(
    transient ? ErrorCode.Unavailable : ErrorCode.InvalidConfig,
    `JetStream asset "${stream}": cannot set ${setting} to ${JSON.stringify(wanted)} (it is ${JSON.stringify(current)}): ${why}`,
    { retryable: transient, cause, details: { asset: stream, setting, current, wanted } },
  );
}

/** The stream's info, or undefined when there is no stream of that name. */
export async function streamInfo(jsm: JetStreamManager, name: string): Promise<StreamInfo | undefined> {
  try {
    return await jsm.streams.info(name);
  } catch (error) {
    if (/not found/i.test((error as Error).message)) return undefined;
    throw error;
  }
}

/**
 * Runs `create` (a KV bucket's or an object store's), and once more when it fails because another process created
 * the same stream meanwhile: a nats-server checks the name, then (apart) the subjects, so the loser of two creations
 * at once may hear "subjects overlap" about the very stream the winner made. The second try finds that stream.
 */
export async function createRacing<T>(
  jsm: () => Promise<JetStreamManager>,
  stream: string,
  create: () => Promise<T>,
): Promise<T> {
  try {
    return await create();
  } catch (error) {
    if (!/subjects overlap/i.test((error as Error)?.message ?? '')) throw error;
    if ((await streamInfo(await jsm(), stream).catch(() => undefined)) === undefined) throw error;
    return create();
  }
}

/**
 * Creates a stream with the wanted settings, or brings an existing one to them: settings JetStream can change are
 * updated; when the server refuses, the error names the asset, the setting, its current and its wanted value.
 * Without `enforceReplicas`, `num_replicas` is used to create the stream only: an existing stream keeps its count.
 */
export async function ensureStream(
  jsm: JetStreamManager,
  wanted: WantedStream,
  options: { enforceReplicas?: boolean } = {},
): Promise<void> {
  const info = await streamInfo(jsm, wanted.name);
  if (info === undefined) {
    try {
      await jsm.streams.add(wanted);
      return;
    } catch (error) {
      const transient = natsFailure(error).retryable;
      // another process created it meanwhile: a nats-server checks the name, then (apart) the subjects, so the loser
      // of two creations at once may hear "subjects overlap" about the very stream the winner made
      const madeMeanwhile =
        /already in use/i.test((error as Error).message) ||
        (await streamInfo(jsm, wanted.name).catch(() => undefined)) !== undefined;
      if (!madeMeanwhile)
        throw new AgentMeshError(
          transient ? ErrorCode.Unavailable : ErrorCode.InvalidConfig,
          `JetStream asset "${wanted.name}": cannot create it with replicas ${wanted.num_replicas ?? 1}: ${(error as Error).message}`,
          {
            retryable: transient,
            cause: error,
            details: { asset: wanted.name, replicas: wanted.num_replicas ?? 1 },
          },
        );
      return ensureStream(jsm, wanted, options);
    }
  }
  const enforced = options.enforceReplicas === false ? { ...wanted, num_replicas: undefined } : wanted;
  const differing = CHECKED.filter(
    (key) => enforced[key] !== undefined && !same(info.config[key], enforced[key]),
  );
  if (differing.length === 0) return;
  let updated: StreamInfo;
  try {
    updated = await jsm.streams.update(wanted.name, {
      ...info.config,
      ...wanted,
      num_replicas: enforced.num_replicas ?? info.config.num_replicas,
    });
  } catch (error) {
    const key = differing[0]!;
    throw assetError(wanted.name, settingName(key), info.config[key], wanted[key], error);
  }
  const kept = differing.find((key) => !same(updated.config[key], wanted[key]));
  if (kept !== undefined)
    throw assetError(
      wanted.name,
      settingName(kept),
      updated.config[kept],
      wanted[kept],
      'the server accepted the update but kept the current value',
    );
}

function settingName(key: keyof StreamConfig): string {
  return key === 'num_replicas' ? 'replicas' : key;
}
