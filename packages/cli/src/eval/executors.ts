import { publishJson, subjects, type RunEvent, type RunRequestInput } from '@agentmesh/protocol';
import { checkProviderConfig, followRun, submitRun } from '@agentmesh/planner';
import { stringFlag } from '../args.js';
import { connectNats, type CommandContext } from '../context.js';
import { startEmbedded } from '../embedded.js';
import { plannerOptions } from '../planner-options.js';
import { checkFleetTools, checkRunStream, expandPacks } from '../commands/run-nats.js';
import { scopeTools } from '../commands/run.js';
import type { ExecuteRun, Variant } from './runner.js';

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
    if (v.provider !== undefined) checkProviderConfig(providers, { provider: v.provider, model: v.model });
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
  return {
    async execute(input: RunRequestInput, onEvent: (e: RunEvent) => void, signal: AbortSignal) {
      const request = input.tools ? { ...input, tools: expandPacks(input.tools) } : input;
      const { run_id: runId } = await submitRun(bus, request, { prefix: ctx.prefix });
      const cancel = () => publishJson(bus, s.runCancel(runId), { reason: 'eval interrupted' });
      signal.addEventListener('abort', cancel, { once: true });
      try {
        return await followRun(bus, runId, { prefix: ctx.prefix, onEvent, signal });
      } finally {
        signal.removeEventListener('abort', cancel);
      }
    },
    stop: () => bus.close(),
  };
}
