import { DEFAULT_PREFIX, type Backend, type RunEvent } from '@agentmesh/protocol';
import { readRunEvents } from '../infra/backend.js';

/** One run and the child runs it started (agent.run / agent.spawn), from the stored events. */
export interface RunTreeNode {
  run_id: string;
  task?: string | undefined;
  /** The final status, `running` while the run has no final event, `unknown` when no event is stored. */
  status: string;
  planner_id?: string | undefined;
  started_at?: string | undefined;
  ended_at?: string | undefined;
  duration_ms?: number | undefined;
  /** The run's own cost (its children's are their nodes'), when its model's price is known. */
  cost_usd?: number | undefined;
  children: RunTreeNode[];
}

/** Summarizes a run from its events (without its children). */
export function treeNode(runId: string, events: readonly RunEvent[]): RunTreeNode {
  const accepted = events.find((e) => e.type === 'run.accepted');
  const started = [...events].reverse().find((e) => e.type === 'run.started');
  const final = events.find((e) => e.type === 'run.completed' || e.type === 'run.failed');
  const status =
    final?.type === 'run.completed'
      ? final.status
      : final?.type === 'run.failed'
        ? 'failed'
        : events.length === 0
          ? 'unknown'
          : 'running';
  const begin = accepted?.ts ?? events[0]?.ts;
  const end = final?.ts;
  return {
    run_id: runId,
    ...(accepted?.type === 'run.accepted' ? { task: accepted.task } : {}),
    status,
    ...(started?.type === 'run.started' ? { planner_id: started.planner_id } : {}),
    ...(begin === undefined ? {} : { started_at: begin }),
    ...(end === undefined ? {} : { ended_at: end }),
    ...(begin !== undefined && end !== undefined ? { duration_ms: Date.parse(end) - Date.parse(begin) } : {}),
    ...(final?.type === 'run.completed' && final.cost_usd !== undefined ? { cost_usd: final.cost_usd } : {}),
    children: [],
  };
}

/** The child run ids a run started, in start order (a re-attach after a resume is listed once). */
export function childIds(events: readonly RunEvent[]): string[] {
  const ids: string[] = [];
  for (const e of events)
    if (e.type === 'agent.started' && !ids.includes(e.child_run_id)) ids.push(e.child_run_id);
  return ids;
}

/** The tree of a run and its children (and theirs, up to `maxDepth` levels), read from the durable event log. */
export async function runTree(
  bus: Backend,
  runId: string,
  options: { prefix?: string; maxDepth?: number; events?: readonly RunEvent[] } = {},
): Promise<RunTreeNode> {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const events = options.events ?? (await readRunEvents(bus, runId, { prefix }));
  const node = treeNode(runId, events);
  if ((options.maxDepth ?? 8) <= 0) return node;
  node.children = await Promise.all(
    childIds(events).map((id) => runTree(bus, id, { prefix, maxDepth: (options.maxDepth ?? 8) - 1 })),
  );
  return node;
}

/** The tree as text lines: id, status, duration, planner and task, children indented under their parent. */
export function formatRunTree(node: RunTreeNode, prefix = '', last = true, root = true): string[] {
  const duration = node.duration_ms === undefined ? '' : `  ${(node.duration_ms / 1000).toFixed(1)} s`;
  const planner = node.planner_id === undefined ? '' : `  (${node.planner_id})`;
  const cost = node.cost_usd === undefined ? '' : `  $${node.cost_usd.toFixed(4)}`;
  const task =
    node.task === undefined ? '' : `  ${node.task.length > 60 ? `${node.task.slice(0, 57)}...` : node.task}`;
  const branch = root ? '' : last ? '└─ ' : '├─ ';
  const lines = [`${prefix}${branch}${node.run_id}  ${node.status}${duration}${cost}${planner}${task}`];
  const inner = root ? '' : `${prefix}${last ? '   ' : '│  '}`;
  node.children.forEach((child, i) =>
    lines.push(...formatRunTree(child, inner, i === node.children.length - 1, false)),
  );
  return lines;
}
