import type { RunEvent, RunRequestInput } from '@agentmesh/protocol';
import { forkRequest, readScriptFile, type ForkChoice } from '@agentmesh/planner';
import { intFlag, stringFlag, usageError, type CommandSpec } from '../args.js';
import { connectNats, type CommandContext } from '../context.js';
import { startEmbedded } from '../embedded.js';
import { embeddedDataDir } from '../sessions-dir.js';
import { runOutput, runOverNats } from './run.js';

/** `--at`, `--id`, `--provider`, `--model` and `--script` as the fork's choice. */
function forkChoice(ctx: CommandContext, spec: CommandSpec, runId: string): ForkChoice {
  const seq = intFlag(ctx.args, 'at');
  if (seq === undefined || seq < 1)
    throw usageError(spec, `runs fork needs --at SEQ, the seq of an event of run ${runId} (1 or more)`);
  const script = stringFlag(ctx.args, 'script');
  const provider = stringFlag(ctx.args, 'provider');
  return {
    runId,
    seq,
    id: stringFlag(ctx.args, 'id'),
    provider: provider as RunRequestInput['provider'],
    model: stringFlag(ctx.args, 'model'),
    ...(script === undefined ? {} : { script: readScriptFile(script) }),
  };
}

/**
 * `agentmesh runs fork RUN_ID --at SEQ`: starts a run from the state of RUN_ID after event SEQ and follows it as
 * `run` does. Over NATS the fleet's planners read the original; without --nats an embedded planner reads it from
 * the data dir (where `agentmesh run --data-dir DIR` kept it). Exit 0 when the fork ends done.
 */
export async function runsFork(ctx: CommandContext, spec: CommandSpec, runId: string): Promise<number> {
  const choice = forkChoice(ctx, spec, runId);
  const out = runOutput(ctx, 'runs fork');
  const announce = (request: { id: string }) => {
    if (ctx.args.values['json'] !== true)
      ctx.io.stderr.write(`forking run ${runId} after seq ${choice.seq} as ${request.id}\n`);
  };
  let final: RunEvent;
  if (ctx.natsUrl !== undefined) {
    const bus = await connectNats(ctx, 'agentmesh-cli');
    const request = await forkRequest(bus, choice, { prefix: ctx.prefix }).finally(() => bus.close());
    announce(request);
    final = await runOverNats(ctx, request, out);
  } else final = await forkEmbedded(ctx, choice, out.render, announce);
  return final.type === 'run.completed' && final.status === 'done' ? 0 : 1;
}

async function forkEmbedded(
  ctx: CommandContext,
  choice: ForkChoice,
  render: (e: RunEvent) => void,
  announce: (request: { id: string }) => void,
): Promise<RunEvent> {
  const mesh = await startEmbedded({
    config: ctx.config,
    logger: ctx.logger,
    io: ctx.io,
    dataDir: embeddedDataDir({ dataDir: stringFlag(ctx.args, 'data-dir', 'AGENTMESH_DATA_DIR') }),
    denyWrites: true,
  });
  try {
    const request = await forkRequest(mesh.bus, choice, { prefix: mesh.planner.prefix });
    announce(request);
    return await mesh.planner.execute(request, { onEvent: render });
  } finally {
    await mesh.stop();
  }
}
