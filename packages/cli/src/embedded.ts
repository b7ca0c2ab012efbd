import { MemoryBus, type Logger } from '@agentmesh/protocol';
import { Catalog } from '@agentmesh/catalog';
import { McpToolSource, ToolWorker } from '@agentmesh/tool-worker';
import { Planner } from '@agentmesh/planner';
import type { AgentMeshConfig } from './config.js';
import type { Io } from './context.js';
import { plannerOptions } from './planner-options.js';
import { PromptQueue } from './prompt-queue.js';
import { SessionFilesBus } from './sessions-dir.js';
import { packTools, selectTools, type KnownTools } from './tools.js';

export interface EmbeddedOptions {
  config: AgentMeshConfig;
  logger: Logger;
  workspace?: string | undefined;
  baseUrl?: string | undefined;
  tools?: string[] | undefined;
  io?: Io;
  /** Ask on the terminal before a tool that writes runs (one prompt per call, each with its own answer). */
  askBeforeWrites?: boolean;
  /** Deny every tool that writes or runs commands (no terminal to ask on and no --yes). */
  denyWrites?: boolean;
  /** The planner's approvals (`approvals:` in the configuration or the request) on the in-process bus. */
  approvals?: boolean;
  /** Keep sessions as files under `<dataDir>/sessions/` (shared with later processes); default in memory only. */
  dataDir?: string | undefined;
}

/** Why a write is denied when there is no terminal to ask on. */
export const NO_TERMINAL_DENIAL =
  'no terminal to ask for approval on: run again with --yes to approve writes and commands, or run over NATS ' +
  '(agentmesh run --nats URL) and decide with "agentmesh runs approve RUN_ID APPROVAL_ID"';

export interface EmbeddedMesh {
  bus: MemoryBus;
  catalog: Catalog;
  worker: ToolWorker;
  planner: Planner;
  /** The tools this mesh serves, and the packs they come from (what `--tools` entries are checked against). */
  known: KnownTools;
  /** The one prompt queue on the terminal (when the run is interactive): every question goes through it. */
  prompts: PromptQueue | undefined;
  stop(): Promise<void>;
}

/** Every actor in this process on the in-process bus: the default for `agentmesh run`. */
export async function startEmbedded(options: EmbeddedOptions): Promise<EmbeddedMesh> {
  const { config, logger } = options;
  const bus =
    options.dataDir === undefined
      ? new MemoryBus({ logger })
      : new SessionFilesBus(options.dataDir, { logger });
  const io = options.io;
  const prompts = options.askBeforeWrites && io ? new PromptQueue(io.stdin, io.stderr) : undefined;
  const confirm = writeConfirmation(prompts, options.denyWrites === true);
  const catalog = new Catalog({
    bus,
    logger,
    exposure: {
      ...(config.tools?.deferred ? { deferred: config.tools.deferred } : {}),
      ...(config.tools?.always ? { always: config.tools.always } : {}),
    },
  });
  await catalog.start();
  const selected = selectTools({
    select: options.tools,
    workspace: options.workspace,
    config,
    confirm,
    logger,
  });
  const mcp = config.mcp === undefined ? undefined : await McpToolSource.connect(config.mcp, { logger });
  const worker = new ToolWorker({ bus, logger, tools: [...selected.tools, ...(mcp?.tools ?? [])] });
  mcp?.reportTo(bus, worker.workerId);
  mcp?.keepInSync(worker);
  await worker.start();
  const planner = new Planner({
    bus,
    logger,
    ...plannerOptions(config, options.baseUrl),
    ...(options.approvals === true ? { approvals: true } : {}),
  });
  await planner.start();
  return {
    bus,
    catalog,
    worker,
    planner,
    known: knownTools(selected.tools.map((t) => t.spec.name)),
    prompts,
    stop: async () => {
      await planner.drain();
      await worker.drain();
      prompts?.close();
      await selected.close();
      await mcp?.close();
      await catalog.stop();
      await bus.close();
    },
  };
}

/**
 * How a workspace write is confirmed: asked on the terminal's prompt queue, refused when there is no terminal to ask
 * (`denyWrites`), or not asked at all.
 */
function writeConfirmation(
  prompts: PromptQueue | undefined,
  denyWrites: boolean,
): ((request: { tool: string; summary: string }) => Promise<boolean>) | undefined {
  if (prompts) return (request) => prompts.confirm(`${request.tool} wants to ${request.summary}. Allow?`);
  if (denyWrites) return () => Promise.reject(new Error(NO_TERMINAL_DENIAL));
  return undefined;
}

/** The tools served, and which of them come from each pack. */
function knownTools(names: string[]): KnownTools {
  const packs = packTools();
  return {
    tools: names,
    packs: {
      builtin: packs.builtin.filter((n) => names.includes(n)),
      workspace: packs.workspace.filter((n) => names.includes(n)),
    },
  };
}
