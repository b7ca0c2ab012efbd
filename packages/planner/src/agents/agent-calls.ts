import { AgentMeshError, ErrorCode, encodeJson, runControlSubjects } from '@agentmesh/protocol';
import type { z } from 'zod';
import type { RunResult } from '../model/result.js';
import type { RunContext } from '../run/context.js';
import { parseToolArgs } from '../run/calls.js';
import {
  ChildArgsSchema,
  NoArgsSchema,
  RunIdArgsSchema,
  SendInputArgsSchema,
  WaitArgsSchema,
  type AgentToolName,
} from './agent-tools.js';
import {
  cancelChildren,
  childAnswer,
  childSummary,
  follow,
  ownChild,
  startChild,
  type ChildRuns,
} from './children.js';

/** Runs one agent.* call in the planner and returns the tool result text (errors are thrown, named). */
export async function agentCall(
  ctx: RunContext,
  runs: ChildRuns,
  callId: string,
  name: AgentToolName,
  args: unknown,
): Promise<string> {
  switch (name) {
    case 'agent.run': {
      const id = await startChild(ctx, runs, callId, parseToolArgs(ChildArgsSchema, args, name));
      return childAnswer(id, await follow(ctx, runs, id));
    }
    case 'agent.spawn': {
      const id = await startChild(ctx, runs, callId, parseToolArgs(ChildArgsSchema, args, name));
      return JSON.stringify({ run_id: id });
    }
    case 'agent.wait':
      return JSON.stringify(await waitFor(ctx, runs, parseToolArgs(WaitArgsSchema, args, name)));
    case 'agent.send_input': {
      const { run_id, text } = parseToolArgs(SendInputArgsSchema, args, name);
      ownChild(ctx, run_id);
      ctx.env.bus.publish(runControlSubjects(ctx.env.prefix).input(run_id), encodeJson({ text }));
      return JSON.stringify({ run_id, sent: true });
    }
    case 'agent.cancel': {
      const { run_id } = parseToolArgs(RunIdArgsSchema, args, name);
      const record = ownChild(ctx, run_id);
      if (record.status === 'running') cancelOne(ctx, run_id);
      return JSON.stringify({ run_id, status: record.status === 'running' ? 'cancelling' : record.status });
    }
    case 'agent.list':
      parseToolArgs(NoArgsSchema, args, name);
      return JSON.stringify({ children: ctx.state.children ?? [] });
  }
}

function cancelOne(ctx: RunContext, id: string): void {
  const { env } = ctx;
  env.bus.publish(env.subjects.runCancel(id), encodeJson({ reason: 'cancelled by its parent' }));
}

/** Waits for the listed children (all of them, or until timeout_ms) and reports each. */
async function waitFor(
  ctx: RunContext,
  runs: ChildRuns,
  args: z.infer<typeof WaitArgsSchema>,
): Promise<{ children: ReturnType<typeof childSummary>[] }> {
  for (const id of args.run_ids) ownChild(ctx, id);
  const finals = new Map<string, RunResult | Error>();
  const all = Promise.all(
    args.run_ids.map((id) =>
      follow(ctx, runs, id).then(
        (final) => void finals.set(id, final),
        (error: unknown) => void finals.set(id, error instanceof Error ? error : new Error(String(error))),
      ),
    ),
  );
  let timer: NodeJS.Timeout | undefined;
  const timeout =
    args.timeout_ms === undefined
      ? undefined
      : new Promise<void>((resolve) => {
          timer = setTimeout(resolve, args.timeout_ms);
        });
  try {
    await Promise.race([all, ...(timeout ? [timeout] : [])]);
  } finally {
    clearTimeout(timer);
  }
  if (ctx.signal.aborted) {
    cancelChildren(ctx);
    throw new AgentMeshError(ErrorCode.Cancelled, 'agent.wait aborted: the run was stopped');
  }
  return { children: args.run_ids.map((id) => childSummary(id, finals.get(id))) };
}
