import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { AlertOutcome, Metrics, PaymentOutcome, PaymentProtocolLabel } from '../core/metrics.ts';

/** What is read from storage when /metrics is scraped, rather than counted as it happens. */
export interface QueueFigures {
  queued: number;
  sending: number;
  due: number;
  oldestDueAt: string | null;
}

export interface ScrapeReadings {
  /** Queued alerts (due now or later), alerts leased by a worker, and the oldest due one. */
  queue(now: Date): Promise<QueueFigures>;
  /** Connections of the database pool (PostgreSQL), or what SQLite has in their place. */
  pool(): { total: number; idle: number | undefined; waiting: number; max: number };
}

export interface ScrapeLog {
  warn(details: object, message: string): void;
}

/** Bucket bounds in seconds. Request durations start at a millisecond: a subscribe takes about that. */
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** From a tenth of a second: an alert usually leaves within one (the aim, docs/performance.md), and a batch waits hours. */
const FIRST_ALERT_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600];
const WEBHOOK_LAG_BUCKETS = [0.1, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600];

/** One request's observer, kept per method, route and status so the hot path skips label hashing. */
type Observe = (seconds: number) => void;

/**
 * The service's metrics, in a registry of its own (several apps may share one process in tests).
 * Counters move as features report (the `Metrics` interface); gauges over storage are read when
 * scraped, so nothing is counted for them on the request path.
 */
export class MetricsRegistry implements Metrics {
  readonly enabled = true;
  readonly registry = new Registry();
  private readonly requests = new Histogram({
    name: 'restock_http_request_duration_seconds',
    help: 'HTTP requests by route pattern, method and status code: time from arrival to the last byte handed to the socket.',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });
  private readonly observers = new Map<string, Observe>();
  /** Scrapes begun, so that what is read from storage is read once per scrape. */
  private scrapes = 0;
  private readonly planned = new Counter({ name: 'restock_alerts_planned_total', help: 'Alerts the dispatch worker queued, by store.', labelNames: ['store'] as const, registers: [this.registry] });
  private readonly settled = new Counter({
    name: 'restock_alerts_settled_total',
    help: 'Alert outcomes recorded in the ledger, by store: sent, skipped, deferred, held (by the plan), retried, failed.',
    labelNames: ['store', 'outcome'] as const,
    registers: [this.registry],
  });
  private readonly firstAlert = new Histogram({
    name: 'restock_restock_to_first_alert_seconds',
    help: 'From a restock being detected to the first of its alerts sent.',
    buckets: FIRST_ALERT_BUCKETS,
    registers: [this.registry],
  });
  private readonly webhookLagSeconds = new Histogram({
    name: 'restock_shopify_webhook_lag_seconds',
    help: 'From a Shopify webhook being received to its processing.',
    buckets: WEBHOOK_LAG_BUCKETS,
    registers: [this.registry],
  });
  private readonly payments = new Counter({
    name: 'restock_payment_outcomes_total',
    help: 'Requests paid per request, by protocol and outcome.',
    labelNames: ['protocol', 'outcome'] as const,
    registers: [this.registry],
  });
  private readonly tokenCache = new Counter({
    name: 'restock_token_cache_lookups_total',
    help: 'Access-token cache look-ups, by result (hit or miss).',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  private readonly refusals = new Counter({
    name: 'restock_rate_limit_refusals_total',
    help: 'Requests refused with 429, by the limit that refused them.',
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /** Records one HTTP request. `route` must be the route's pattern, never the requested path. */
  observeRequest(method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${status} ${route}`;
    let observe = this.observers.get(key);
    if (!observe) {
      const child = this.requests.labels(method, route, String(status));
      observe = (value) => child.observe(value);
      this.observers.set(key, observe);
    }
    observe(seconds);
  }

  /** Adds the gauges read from storage at each scrape; a failed read leaves them out of that scrape. */
  readAtScrape(readings: ScrapeReadings, log: ScrapeLog): void {
    const registers = [this.registry];
    // One read per scrape serves the three queue gauges, which prom-client collects together.
    let reading: { scrape: number; queue: Promise<QueueFigures | undefined> } | undefined;
    const read = () => {
      if (reading?.scrape !== this.scrapes) {
        const queue = readings.queue(new Date()).catch((err: unknown) => {
          log.warn({ err }, 'metrics: the alert queue could not be read for this scrape');
          return undefined;
        });
        reading = { scrape: this.scrapes, queue };
      }
      return reading.queue;
    };
    new Gauge({
      name: 'restock_alert_queue_depth',
      help: 'Alerts in the send queue: queued (due now or later) and sending (leased by a worker).',
      labelNames: ['status'] as const,
      registers,
      async collect() {
        const queue = await read();
        this.reset();
        if (!queue) return;
        this.set({ status: 'queued' }, queue.queued);
        this.set({ status: 'sending' }, queue.sending);
      },
    });
    new Gauge({
      name: 'restock_alert_queue_due',
      help: 'Queued alerts whose time has come.',
      registers,
      async collect() {
        const queue = await read();
        this.reset();
        if (queue) this.set(queue.due);
      },
    });
    new Gauge({
      name: 'restock_alert_queue_oldest_due_age_seconds',
      help: 'How long the oldest due alert has waited past its time (0 when none is due).',
      registers,
      async collect() {
        const queue = await read();
        this.reset();
        if (queue) this.set(queue.oldestDueAt ? Math.max(0, (Date.now() - Date.parse(queue.oldestDueAt)) / 1000) : 0);
      },
    });
    new Gauge({
      name: 'restock_db_pool_connections',
      help: 'Database connections: PostgreSQL pool connections open (total) and idle; SQLite connections open (total).',
      labelNames: ['state'] as const,
      registers,
      collect() {
        const use = readings.pool();
        this.reset();
        this.set({ state: 'total' }, use.total);
        if (use.idle !== undefined) this.set({ state: 'idle' }, use.idle);
      },
    });
    new Gauge({
      name: 'restock_db_pool_waiting',
      help: 'PostgreSQL: queries waiting for a pool connection. SQLite: writes waiting for the next group commit.',
      registers,
      collect() {
        this.set(readings.pool().waiting);
      },
    });
    new Gauge({
      name: 'restock_db_pool_max',
      help: 'PostgreSQL: the pool size (PG_POOL_MAX). SQLite: the connections it keeps open.',
      registers,
      collect() {
        this.set(readings.pool().max);
      },
    });
  }

  /** The text format, and its content type. */
  async exposition(): Promise<{ body: string; contentType: string }> {
    this.scrapes++;
    return { body: await this.registry.metrics(), contentType: this.registry.contentType };
  }

  alertsPlanned(store: string, n: number): void {
    if (n > 0) this.planned.inc({ store }, n);
  }

  alertsSettled(store: string, outcome: AlertOutcome, n: number): void {
    if (n > 0) this.settled.inc({ store, outcome }, n);
  }

  restockToFirstAlert(seconds: number): void {
    this.firstAlert.observe(Math.max(0, seconds));
  }

  webhookLag(seconds: number): void {
    this.webhookLagSeconds.observe(Math.max(0, seconds));
  }

  paymentOutcome(protocol: PaymentProtocolLabel, outcome: PaymentOutcome): void {
    this.payments.inc({ protocol, outcome });
  }

  tokenCacheLookup(hit: boolean): void {
    this.tokenCache.inc({ result: hit ? 'hit' : 'miss' });
  }

  rateLimitRefused(limit: string): void {
    this.refusals.inc({ limit });
  }
}
