import { TaskState, type ListTasksRequest, type ListTasksResponse, type Task } from '@a2a-js/sdk';
import {
  InMemoryTaskStore,
  resolveUserScope,
  type ServerCallContext,
  type TaskStore,
} from '@a2a-js/sdk/server';

/** How many tasks `a2a serve` keeps by default. */
export const DEFAULT_MAX_TASKS = 1000;

const FINISHED: ReadonlySet<TaskState> = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_REJECTED,
]);

interface Entry {
  task: Task;
  context: ServerCallContext;
  scope: string;
}

function scopeOf(context: ServerCallContext): string {
  return JSON.stringify([context.tenant ?? '', resolveUserScope(context)]);
}

/**
 * A task store that keeps at most `maxTasks` tasks: past that, the oldest finished task goes first (the oldest
 * task of any state when none has finished). Loads and saves are scoped by tenant and caller as in the SDK's
 * `InMemoryTaskStore`, whose filtering and paging `list` reuses.
 */
export class BoundedTaskStore implements TaskStore {
  private readonly entries = new Map<string, Entry>();

  constructor(readonly maxTasks = DEFAULT_MAX_TASKS) {
    if (!Number.isInteger(maxTasks) || maxTasks < 1)
      throw new RangeError(`maxTasks must be a whole number of at least 1, got ${maxTasks}`);
  }

  /** Tasks kept now (every scope). */
  get size(): number {
    return this.entries.size;
  }

  load(taskId: string, context: ServerCallContext): Promise<Task | undefined> {
    const entry = this.entries.get(JSON.stringify([scopeOf(context), taskId]));
    return Promise.resolve(entry === undefined ? undefined : structuredClone(entry.task));
  }

  save(task: Task, context: ServerCallContext): Promise<void> {
    const scope = scopeOf(context);
    const key = JSON.stringify([scope, task.id]);
    const known = this.entries.has(key);
    this.entries.set(key, { task: structuredClone(task), context, scope });
    if (!known) this.evict();
    return Promise.resolve();
  }

  async list(params: ListTasksRequest, context: ServerCallContext): Promise<ListTasksResponse> {
    const scope = scopeOf(context);
    const view = new InMemoryTaskStore();
    for (const entry of this.entries.values())
      if (entry.scope === scope) await view.save(entry.task, entry.context);
    return view.list(params, context);
  }

  private evict(): void {
    while (this.entries.size > this.maxTasks) {
      let victim: string | undefined;
      for (const [key, entry] of this.entries)
        if (entry.task.status !== undefined && FINISHED.has(entry.task.status.state)) {
          victim = key;
          break;
        }
      this.entries.delete(victim ?? this.entries.keys().next().value!);
    }
  }
}
