/**
 * What features report to the service's metrics (src/observability serves them at /metrics).
 * Features hold this interface, never the registry, so a feature or a test built without metrics
 * gets `noMetrics` and pays nothing. Figures that can be read from storage when scraped (queue
 * depth, the oldest due alert, the connection pool) are not reported through here.
 */
export interface Metrics {
  /** False for `noMetrics`: a report that needs a query of its own is skipped then. */
  readonly enabled: boolean;
  /** Alerts the worker queued for a store (one per channel of each shopper planned). */
  alertsPlanned(store: string, n: number): void;
  /** Alerts whose outcome the worker recorded in the ledger, by store and outcome. */
  alertsSettled(store: string, outcome: AlertOutcome, n: number): void;
  /** From a restock's detection to the first of its alerts sent. */
  restockToFirstAlert(seconds: number): void;
  /** From a Shopify webhook's receipt to its processing, once processed. */
  webhookLag(seconds: number): void;
  /** A step of a request paid per request, by protocol. */
  paymentOutcome(protocol: PaymentProtocolLabel, outcome: PaymentOutcome): void;
  /** A look-up in an access-token cache: found there, or fetched. */
  tokenCacheLookup(hit: boolean): void;
  /** A request refused by a rate limit, named as the limit is ('credential', or an address policy). */
  rateLimitRefused(limit: string): void;
}

/**
 * What became of an alert, as the ledger records it: `held` is a deferral for the store's plan
 * allowance, `deferred` any other (the frequency cap, quiet hours), `retried` a transient failure.
 */
export type AlertOutcome = 'sent' | 'skipped' | 'deferred' | 'held' | 'retried' | 'failed';

/** `none` for a challenge made before any proof, `unknown` for a proof no protocol could read. */
export type PaymentProtocolLabel = 'x402' | 'mpp' | 'none' | 'unknown';

/**
 * - challenged: answered 402 with offers, no proof given;
 * - refused: the input or the store's rule refused the call before any charge;
 * - rejected: a proof that was not accepted (fresh offers, or a refusal);
 * - settled, pending (outcome unknown yet, reconciled later), undone (the handler failed),
 *   settle-refused (the settlement was refused after the handler ran).
 */
export type PaymentOutcome = 'challenged' | 'refused' | 'rejected' | 'settled' | 'pending' | 'undone' | 'settle-refused';

const nothing = () => {};

/** Metrics off: every report is dropped. */
export const noMetrics: Metrics = {
  enabled: false,
  alertsPlanned: nothing,
  alertsSettled: nothing,
  restockToFirstAlert: nothing,
  webhookLag: nothing,
  paymentOutcome: nothing,
  tokenCacheLookup: nothing,
  rateLimitRefused: nothing,
};
