import { deserialize, serialize } from 'node:v8';
import { TaskState, type ListTasksRequest, type ListTasksResponse, type Task } from '@a2a-js/sdk';
import type { ServerCallContext, TaskStore } from '@a2a-js/sdk/server';
import { UnsupportedOperationError } from '@a2a-js/sdk/errors';

/** How long a task is kept, and how much is kept per holder and in all (docs/a2a.md, "Tasks"). */
interface TaskLimits {
  ttlMs: number;
  perHolder: { tasks: number; bytes: number };
  total: { tasks: number; bytes: number };
}

const TASK_LIMITS: TaskLimits = {
  ttlMs: 60 * 60 * 1000,
  perHolder: { tasks: 100, bytes: 1024 * 1024 },
  total: { tasks: 10_000, bytes: 32 * 1024 * 1024 },
};

/**
 * Who a kept task is charged to: an agent, or a client without a token by its address. Tokens are
 * free, so the total bound is what holds memory down; the holder's bound keeps one caller from
 * pushing every other caller's tasks out first.
 */
export type HolderOf = (context: ServerCallContext) => string;

interface Kept {
  key: string;
  holder: string;
  /** The task as V8 serializes it: what is counted is exactly what is held, a copy nobody else references. */
  copy: Uint8Array;
  savedAt: number;
}

/**
 * Tasks in this process's memory, as few as their use needs. Every skill answers at once, so a
 * task is only the record of an answer already given (read again with `tasks/get`) or, for a call
 * to be paid, the offer waiting for its payment; the records that matter (subscriptions,
 * sessions, payments) are in the database.
 *
 * Kept: a task waiting for input (the x402 offer, which the payment answers), and a completed
 * task of an agent with a token (only a token reads a task again). A refused, failed or cancelled
 * task is not kept, and a save that ends a kept task removes it: answering it again finds none.
 *
 * Each task is kept for `ttlMs` after its last save, held as one serialized copy and counted in
 * its bytes. A holder over its bound (tasks or bytes) loses its own oldest tasks; the store over
 * its bound loses its oldest. A task larger than a holder's whole bound is answered, not kept.
 * Tasks are found as the SDK's own store finds them: by tenant, user name and id.
 */
export class ExpiringTaskStore implements TaskStore {
  private readonly tasks = new Map<string, Kept>();
  private readonly holders = new Map<string, { tasks: Map<string, Kept>; bytes: number }>();
  private bytes = 0;

  private readonly limits = TASK_LIMITS;

  constructor(private readonly holderOf: HolderOf) {}

  async load(taskId: string, context: ServerCallContext): Promise<Task | undefined> {
    this.expire();
    const kept = this.tasks.get(keyOf(taskId, context));
    return kept ? (deserialize(kept.copy) as Task) : undefined;
  }

  async save(task: Task, context: ServerCallContext): Promise<void> {
    this.expire();
    const key = keyOf(task.id, context);
    this.remove(key);
    if (!isKept(task, context)) return;
    // A plain copy of exactly its length: the serializer's own buffer can be larger than its content.
    const copy = new Uint8Array(serialize(task));
    if (copy.byteLength > this.limits.perHolder.bytes) return;
    const holderKey = this.holderOf(context);
    const kept: Kept = { key, holder: holderKey, copy, savedAt: Date.now() };
    let holder = this.holders.get(holderKey);
    if (!holder) this.holders.set(holderKey, (holder = { tasks: new Map(), bytes: 0 }));
    this.tasks.set(key, kept);
    holder.tasks.set(key, kept);
    holder.bytes += copy.byteLength;
    this.bytes += copy.byteLength;
    // The task just saved is the newest and fits alone, so neither loop reaches it.
    while (holder.tasks.size > this.limits.perHolder.tasks || holder.bytes > this.limits.perHolder.bytes) {
      this.remove(holder.tasks.keys().next().value!);
    }
    while (this.tasks.size > this.limits.total.tasks || this.bytes > this.limits.total.bytes) {
      this.remove(this.tasks.keys().next().value!);
    }
  }

  /** Tasks are not listed: each is answered when it is sent, and read again by its id. */
  async list(_params: ListTasksRequest, _context: ServerCallContext): Promise<ListTasksResponse> {
    throw new UnsupportedOperationError('Tasks are not listed here: each message is answered with its task, which tasks/get reads again by its id.');
  }

  /** Drops the tasks past their time; the oldest come first, a task saved again moving to the end. */
  private expire(): void {
    const before = Date.now() - this.limits.ttlMs;
    for (const kept of this.tasks.values()) {
      if (kept.savedAt > before) return;
      this.remove(kept.key);
    }
  }

  private remove(key: string): void {
    const kept = this.tasks.get(key);
    if (!kept) return;
    this.tasks.delete(key);
    this.bytes -= kept.copy.byteLength;
    const holder = this.holders.get(kept.holder)!;
    holder.tasks.delete(key);
    holder.bytes -= kept.copy.byteLength;
    if (holder.tasks.size === 0) this.holders.delete(kept.holder);
  }
}

/** The SDK's own scope of a task: its tenant, its user's name, its id. */
function keyOf(taskId: string, context: ServerCallContext): string {
  return `${context.tenant ?? ''}\0${context.user?.userName ?? ''}\0${taskId}`;
}

function isKept(task: Task, context: ServerCallContext): boolean {
  const state = task.status?.state;
  if (state === TaskState.TASK_STATE_INPUT_REQUIRED) return true;
  // A working task is a subscription waiting for its news (push notifications): read again, or given another push configuration.
  return (state === TaskState.TASK_STATE_COMPLETED || state === TaskState.TASK_STATE_WORKING) && context.user?.isAuthenticated === true;
}
