/**
 * Background work a feature hands to the worker (Shopify's webhook queue, periodic
 * reconciliation, payment settlement), which the dispatch worker runs. The worker runs each job on every turn, or every `everyMs` when given, and
 * keeps turning without a pause while any job reports work done.
 */
export interface WorkerJob {
  name: string;
  /** Does one bounded slice of work at the worker's time `now` (the real time when absent); resolves to how many items it handled (0: nothing to do). */
  run(now?: Date): Promise<number>;
  /** Run at most this often (periodic jobs such as reconciliation). */
  everyMs?: number;
}
