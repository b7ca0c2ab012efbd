import { daemonStatuses, triggerRun, type RunRecord } from '@agentmesh/planner';
import { newRequestId, type Backend } from '@agentmesh/protocol';
import { stringFlag, usageError, type CommandSpec } from '../args.js';
import { tenantOption, type CommandContext } from '../context.js';
import { attemptsNote, deadlineMs, outcomeFields, retryLogger } from './runs-hitl.js';

/** `agentmesh runs trigger RUN --kind K [--data JSON]`: queues a trigger for a daemon run. */
export async function runsTrigger(
  ctx: CommandContext,
  spec: CommandSpec,
  bus: Backend,
  runId: string,
): Promise<number> {
  const kind = stringFlag(ctx.args, 'kind');
  if (kind === undefined || kind.trim() === '') throw usageError(spec, 'runs trigger needs --kind KIND');
  const raw = stringFlag(ctx.args, 'data');
  let data: unknown = {};
  if (raw !== undefined) {
    try {
      data = JSON.parse(raw) as unknown;
    } catch (error) {
      throw usageError(spec, `--data is not valid JSON: ${(error as Error).message}`);
    }
    if (typeof data !== 'object' || data === null || Array.isArray(data))
      throw usageError(spec, '--data must be a JSON object, e.g. --data \'{"path": "src/a.ts"}\'');
  }
  const reply = await triggerRun(
    bus,
    runId,
    { ...(data as object), kind, request_id: stringFlag(ctx.args, 'request-id') ?? newRequestId() },
    {
      prefix: ctx.prefix,
      tenant: tenantOption(ctx),
      timeoutMs: deadlineMs(ctx),
      onRetry: retryLogger(ctx, 'trigger'),
    },
  );
  if (ctx.args.values['json'] === true)
    ctx.io.stdout.write(`${JSON.stringify({ ...reply, ...outcomeFields(reply) })}\n`);
  else
    ctx.io.stdout.write(
      `trigger ${reply.seq} queued for ${runId} (${reply.depth} waiting)${attemptsNote(reply)}\n`,
    );
  return 0;
}

/** ` daemon idle, 2 queued` for the daemon runs of a list, keyed by run id. */
export async function daemonLabels(
  ctx: CommandContext,
  bus: Backend,
  runs: readonly Pick<RunRecord, 'run_id' | 'state'>[],
): Promise<Map<string, string>> {
  const running = runs.filter((r) => r.state !== 'finished').map((r) => r.run_id);
  if (running.length === 0) return new Map();
  const statuses = await daemonStatuses(bus, running, { prefix: ctx.prefix }).catch((error: unknown) => {
    ctx.logger.warn({ err: (error as Error).message }, 'daemon states not read');
    return new Map<string, { state: string; depth: number }>();
  });
  return new Map([...statuses].map(([id, s]) => [id, ` daemon ${s.state}, ${s.depth} queued`]));
}
