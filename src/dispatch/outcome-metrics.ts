import type { AlertOutcome, Metrics } from '../core/metrics.ts';
import type { Outcome } from './settler.ts';
import type { ClaimedNotification, DispatchRepository } from './repository.ts';

/** Restocks whose first alert a registry has measured, at most this many remembered. */
const REMEMBERED_RESTOCKS = 10_000;
const measured = new WeakMap<Metrics, Set<string>>();

/** How the metrics name an outcome the ledger records. */
export function outcomeLabel(outcome: Outcome): AlertOutcome {
  switch (outcome.kind) {
    case 'sent':
      return 'sent';
    case 'skipped':
      return 'skipped';
    case 'deferred':
      return outcome.heldByPlan ? 'held' : 'deferred';
    case 'retry':
      return 'retried';
    case 'failed':
      return 'failed';
  }
}

/**
 * Counts a written group of outcomes by store, and measures detection → first alert for each
 * restock whose first batch this group sent from. "First" is per worker process: the first of a
 * restock's alerts it settles as sent (a restock spread over several workers is measured by each,
 * the earliest being the true figure). One read of the restock's detection time per restock.
 */
export async function reportSettled(metrics: Metrics | undefined, store: Pick<DispatchRepository, 'findRestock'>, settled: Array<{ row: ClaimedNotification; outcome: Outcome }>, sentAt: string): Promise<void> {
  if (!metrics?.enabled || settled.length === 0) return;
  const counts = new Map<string, { store: string; outcome: AlertOutcome; n: number }>();
  const firstSent = new Map<string, ClaimedNotification>();
  let seen = measured.get(metrics);
  if (!seen) measured.set(metrics, (seen = new Set()));
  for (const { row, outcome } of settled) {
    const label = outcomeLabel(outcome);
    const key = `${row.store_domain}\n${label}`;
    const count = counts.get(key) ?? { store: row.store_domain, outcome: label, n: 0 };
    count.n++;
    counts.set(key, count);
    if (label === 'sent' && row.kind === 'alert' && row.batch === 1 && !seen.has(row.restock_id)) firstSent.set(row.restock_id, row);
  }
  for (const { store: domain, outcome, n } of counts.values()) metrics.alertsSettled(domain, outcome, n);
  for (const [restockId, row] of firstSent) {
    if (seen.size >= REMEMBERED_RESTOCKS) seen.clear();
    seen.add(restockId);
    const restock = await store.findRestock(row.store_domain, restockId).catch(() => undefined);
    if (restock) metrics.restockToFirstAlert((Date.parse(sentAt) - Date.parse(restock.detected_at)) / 1000);
  }
}
