import { publishJson, subjects, type RunEvent, type RunRequestInput } from '@agentmesh/protocol';
import { checkProviderConfig, followRun, submitRun } from '@agentmesh/planner';
import { stringFlag } from '../args.js';
import { connectNats, type CommandContext } from '../context.js';
import { startEmbedded } from '../embedded.js';
import { plannerOptions } from '../planner-options.js';
import { checkFleetTools, checkRunStream, expandPacks } from '../commands/run-nats.js';
import { scopeTools } from '../commands/run.js';
import { printable } from './report.js';
import type { ExecuteRun, Variant } from './runner.js';

/** How long a submitted case may wait for its first event before the eval says no planner seems to take it. */
export const WAITING_HINT_MS = 5000;

/** Runs cases with: `execute` starts one, `stop` releases what it holds. */
export interface Executor {
  execute: ExecuteRun;
  stop(): Promise<void>;
}

/**
 * The in-process actors `agentmesh run` starts (catalog, workers, one planner), shared by every case. Writes are
 * denied: nobody is at the terminal to approve them. Each variant's provider is checked up front (a missing key is
 * a configuration error before any case runs).
 */
export async function embeddedExecutor(ctx: CommandContext, variants: readonly Variant[]): Promise<Executor> {
  const workspace = stringFlag(ctx.args, 'workspace', 'AGENTMESH_WORKSPACE');
  const providers = plannerOptions(ctx.config).providers;
  for (const v of variants)
    // a scripted variant's turns come with each case
    if (v.provider !== undefined && v.provider !== 'scripted')
      checkProviderConfig(providers, { provider: v.provider, model: v.model });
  const mesh = await startEmbedded({ config: ctx.config, logger: ctx.logger, workspace, denyWrites: true });
  return {
    async execute(request, onEvent, signal) {
      const scoped = request.tools ? { ...request, tools: scopeTools(request.tools, mesh.known) } : request;
      return mesh.planner.execute(scoped, { signal, onEvent });
    },
    stop: () => mesh.stop(),
  };
}

/**
 * Submits each case to the fleet and follows its events, as `agentmesh run --nats` does, over one connection: the
 * planners of the fleet share the cases between them.
 */
export async function natsExecutor(ctx: CommandContext): Promise<Executor> {
  const bus = await connectNats(ctx, 'agentmesh-eval');
  try {
    await checkRunStream(bus, ctx);
    await checkFleetTools(bus, ctx, (_code, message) =>
      ctx.io.stderr.write(`agentmesh eval: warning: ${message}\n`),
    );
  } catch (error) {
    await bus.close();
    throw error;
  }
  const s = subjects(ctx.prefix);
  const waiting = waitingHint(ctx);
  return {
    async execute(input: RunRequestInput, onEvent: (e: RunEvent) => void, signal: AbortSignal) {
      const request = input.tools ? { ...input, tools: expandPacks(input.tools) } : input;
      const { run_id: runId } = await submitRun(bus, request, { prefix: ctx.prefix });
      const cancel = () => publishJson(bus, s.runCancel(runId), { reason: 'eval interrupted' });
      signal.addEventListener('abort', cancel, { once: true });
      const timer = waiting.arm(runId);
      try {
        return await followRun(bus, runId, {
          prefix: ctx.prefix,
          onEvent: (e) => {
            clearTimeout(timer);
            waiting.taken();
            if (e.type === 'approval.requested')
              ctx.io.stderr.write(
                `agentmesh eval: run ${runId} waits for approval ${e.approval_id} (${printable(e.summary)}): agentmesh runs approve ${runId} ${e.approval_id}, or deny it with agentmesh runs deny\n`,
              );
            onEvent(e);
          },
          signal,
        });
      } finally {
        clearTimeout(timer);
        signal.removeEventListener('abort', cancel);
      }
    },
    stop: () => bus.close(),
  };
}

/**
 * Says once on stderr when a run has not been taken by a planner after {@link WAITING_HINT_MS} and no planner has
 * taken any case yet (later cases queued behind busy planners are no news).
 */
function waitingHint(ctx: CommandContext) {
  let said = false;
  return {
    taken: () => {
      said = true;
    },
    arm: (runId: string) =>
      setTimeout(() => {
        if (said) return;
        said = true;
        ctx.io.stderr.write(
          `agentmesh eval: waiting for a planner to take run ${runId} (is one running? agentmesh planner --nats URL)...\n`,
        );
      }, WAITING_HINT_MS),
  };
}
