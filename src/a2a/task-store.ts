import { InMemoryTaskStore, type ServerCallContext, type TaskStore } from '@a2a-js/sdk/server';
import type { ListTasksRequest, ListTasksResponse, Task } from '@a2a-js/sdk';
import { UnsupportedOperationError } from '@a2a-js/sdk/errors';

/**
 * Tasks in this process's memory, for a while and up to a number. Every skill answers at once,
 * so a task is only the record of an answer already given (read again with `tasks/get`) or, for
 * a call to be paid, the offer waiting for its payment. The records that matter (subscriptions,
 * sessions, payments) are in the database; a task is kept for at least `ttlMs` (and at most
 * twice that), and never more than twice `maxTasks` at once: two generations of the SDK's
 * owner-scoped store, the older dropped as a new one starts.
 */
export class ExpiringTaskStore implements TaskStore {
  private current = new InMemoryTaskStore();
  private previous = new InMemoryTaskStore();
  private startedAt: number;
  private saved = 0;

  constructor(
    private readonly ttlMs: number,
    private readonly maxTasks: number,
    private readonly now: () => number = Date.now,
  ) {
    this.startedAt = now();
  }

  async load(taskId: string, context: ServerCallContext): Promise<Task | undefined> {
    this.turn();
    return (await this.current.load(taskId, context)) ?? (await this.previous.load(taskId, context));
  }

  async save(task: Task, context: ServerCallContext): Promise<void> {
    this.turn();
    this.saved++;
    await this.current.save(task, context);
  }

  /** Tasks are not listed: each is answered when it is sent, and read again by its id. */
  async list(_params: ListTasksRequest, _context: ServerCallContext): Promise<ListTasksResponse> {
    throw new UnsupportedOperationError('Tasks are not listed here: each message is answered with its task, which tasks/get reads again by its id.');
  }

  private turn(): void {
    if (this.now() - this.startedAt < this.ttlMs && this.saved < this.maxTasks) return;
    this.previous = this.current;
    this.current = new InMemoryTaskStore();
    this.startedAt = this.now();
    this.saved = 0;
  }
}
