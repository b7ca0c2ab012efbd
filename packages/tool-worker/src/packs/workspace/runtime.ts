import { AgentMeshError, ErrorCode, type Identity } from '@agentmesh/protocol';
import { BoundaryRule, denied } from './errors.js';
import {
  resolveWorkspaceConfig,
  type ConfirmationRequest,
  type ResolvedWorkspaceConfig,
  type WorkspaceOptions,
} from './options.js';
import { CommandStore } from './process-store.js';
import { WorkspaceResolver, type ResolverHooks } from './resolver.js';

/** What a workspace handler needs from its call: the ToolContext of a worker satisfies it. */
export interface WorkspaceCallContext {
  signal: AbortSignal;
  runId?: string;
  callId?: string;
  identity?: Identity;
  emit?: (message: string, data?: unknown) => void;
}

/** The state of one pack instance: configuration, the path gate and the command handles. No state is shared between instances. */
export interface WorkspaceRuntime {
  config: ResolvedWorkspaceConfig;
  resolver: WorkspaceResolver;
  commands: CommandStore;
}

export function createWorkspaceRuntime(
  options: WorkspaceOptions,
  hooks: ResolverHooks = {},
): WorkspaceRuntime {
  const config = resolveWorkspaceConfig(options);
  return {
    config,
    resolver: new WorkspaceResolver(config, hooks),
    commands: new CommandStore({
      maxRunning: config.maxRunningCommands,
      maxKept: config.maxKeptHandles,
      bufferBytes: config.maxCommandBufferBytes,
    }),
  };
}

export function tenantOf(ctx: WorkspaceCallContext): string {
  return ctx.identity?.tenant ?? 'default';
}

export function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted)
    throw new AgentMeshError(ErrorCode.Cancelled, 'the tool call was cancelled', { retryable: false });
}

/** Asks the embedding program's confirmation hook, when there is one; a refusal is `permission_denied`. */
export async function confirmOrRefuse(
  runtime: WorkspaceRuntime,
  ctx: WorkspaceCallContext,
  tool: string,
  summary: string,
  args: unknown,
): Promise<void> {
  const confirm = runtime.config.confirm;
  if (confirm === undefined) return;
  throwIfAborted(ctx.signal);
  const request: ConfirmationRequest = {
    tool,
    summary,
    arguments: args,
    run_id: ctx.runId,
    call_id: ctx.callId,
    identity: ctx.identity,
  };
  let approved: boolean;
  try {
    approved = (await confirm(request)) === true;
  } catch (error) {
    throw new AgentMeshError(
      ErrorCode.PermissionDenied,
      `${tool} needed confirmation and the confirmation failed: ${(error as Error).message}`,
      {
        retryable: false,
        details: { rule: BoundaryRule.Declined },
        cause: error,
      },
    );
  }
  throwIfAborted(ctx.signal);
  if (!approved) {
    throw denied(
      BoundaryRule.Declined,
      `the user declined: ${summary}. Do not retry the same action; ask or try something else`,
      { tool },
    );
  }
}

/** Appends a visible notice when a text was cut. */
export function cutNotice(what: string, shown: number, total: number, hint: string): string {
  return `[${what}: showing ${shown} of ${total} bytes; ${hint}]`;
}
