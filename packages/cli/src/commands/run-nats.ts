import {
  AgentMeshError,
  CatalogListReplySchema,
  ErrorCode,
  isAgentMeshError,
  requestJson,
  streamNames,
  subjects,
  type Backend,
} from '@agentmesh/protocol';
import type { CommandContext } from '../context.js';
import { packTools, TOOL_PACKS } from '../tools.js';

/** How long the CLI waits for a catalog to answer before it says none does (documented in docs/cli.md). */
export const CATALOG_TIMEOUT_MS = 5000;

/**
 * Checks that the runs stream exists before a run is submitted: a missing stream means no planner has started on
 * this server yet (planners create it); only a server without JetStream is reported as such.
 */
export async function checkRunStream(bus: Backend, ctx: CommandContext): Promise<void> {
  const stream = streamNames(ctx.prefix).runs;
  const facts = await bus.streamFacts(stream).catch((error: unknown) => {
    throw new AgentMeshError(
      ErrorCode.JetStreamUnavailable,
      `NATS at ${ctx.natsUrl} has no JetStream: start the server with "nats-server -js" (or enable jetstream in its config)`,
      { cause: error },
    );
  });
  if (facts === undefined)
    throw new AgentMeshError(
      ErrorCode.Unavailable,
      `no planner has set up the run stream ${stream} on ${ctx.natsUrl} yet: start one with "agentmesh planner --nats ${ctx.natsUrl}"`,
    );
}

/** Pack names in a `--tools` list become the canonical names of their tools (the planner knows no packs). */
export function expandPacks(entries: readonly string[]): string[] {
  const packs = packTools();
  return [
    ...new Set(
      entries.flatMap((e) =>
        (TOOL_PACKS as readonly string[]).includes(e) ? packs[e as keyof typeof packs] : [e],
      ),
    ),
  ];
}

/**
 * Warns before submitting when no catalog answers or the catalog lists no tool (the run would see no tool). A NATS
 * user not granted the catalog (an older deploy/nats/nats.conf) gets a warning too: the check is advice, the run
 * is still submitted.
 */
export async function checkFleetTools(
  bus: Backend,
  ctx: CommandContext,
  warn: (code: string, message: string) => void,
  tenant?: string | undefined,
): Promise<void> {
  const s = subjects(ctx.prefix);
  const subject = tenant === undefined ? s.catalogList : s.tenant(tenant).catalog('list');
  try {
    const reply = await requestJson(bus, subject, {}, CatalogListReplySchema, {
      timeoutMs: CATALOG_TIMEOUT_MS,
    });
    if (reply.tools.length === 0)
      warn('no_tools', `no tools are registered: start a worker (agentmesh worker --nats ${ctx.natsUrl})`);
  } catch (error) {
    if (isAgentMeshError(error, ErrorCode.PermissionDenied)) {
      warn(
        'catalog_refused',
        `NATS refused this user the catalog check (${subject}): submitting without it; grant the user ${subject} to see missing tools before a run`,
      );
      return;
    }
    if (!isAgentMeshError(error, ErrorCode.NoResponders) && !isAgentMeshError(error, ErrorCode.Timeout))
      throw error;
    warn(
      'no_catalog',
      `no catalog answered on ${subject} within ${CATALOG_TIMEOUT_MS / 1000} s: start one (agentmesh catalog --nats ${ctx.natsUrl}); the planner waits up to 30 s for one, then fails the run`,
    );
  }
}
