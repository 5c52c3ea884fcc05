import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import type { AlertService } from '../alerts/service.ts';
import type { DispatchConfig } from '../config.ts';
import { MailDeliveryError, type MailTransport } from '../core/mail/transport.ts';
import { chunks } from '../core/chunks.ts';
import { newId } from '../core/ids.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import { localeSchema, type EffectiveSettings } from '../stores/settings.ts';
import type { WorkerJob } from './jobs.ts';
import type { AlertSenders } from './senders.ts';
import { OVER_ALLOWANCE, type DispatchService } from './service.ts';
import type { DispatchStore, NotificationRow, RestockRow } from './store.ts';
import { renderAlert } from './templates.ts';

/** The store's allowance (the billing feature): how many of its alerts may go out now. */
export interface AlertQuota {
  reserveAlerts(storeDomain: string, wanted: number, ownMailProvider: boolean): Promise<{ granted: number; periodStart: string; retryAt: string; reason?: string }>;
  releaseAlerts(storeDomain: string, periodStart: string, count: number): Promise<unknown>;
}

export interface WorkerDeps {
  quota: AlertQuota;
  store: DispatchStore;
  dispatch: DispatchService;
  alerts: AlertService;
  inventory: InventoryService;
  stores: StoreService;
  senders: AlertSenders;
  config: DispatchConfig;
  log: FastifyBaseLogger;
  jobs: WorkerJob[];
}

/** How many restocks one turn plans at most, so sending is never starved by planning. */
const RESTOCKS_PER_TURN = 10;
/** Settled outcomes are written in groups this large, or after FLUSH_EVERY_MS, whichever first. */
const FLUSH_SIZE = 250;
const FLUSH_EVERY_MS = 100;
/** Alerts handed to the transport and not yet answered, at most (its pool queues them). */
const MAX_OUTSTANDING_SENDS = 50;
const SEND_LIMIT_MS = 5 * 60_000;
const MAX_RETRY_DELAY_MS = 6 * 3600_000;

/** A leased alert, checked and ready to go out. */
interface Outgoing {
  row: NotificationRow;
  transport: MailTransport;
  message: Parameters<MailTransport['send']>[0];
  /** The billing period whose allowance this alert was counted against. */
  quotaPeriod?: string;
}

type Outcome =
  | { kind: 'sent' }
  | { kind: 'skipped'; why: string; notified: boolean }
  | { kind: 'deferred'; until: string; why?: string }
  | { kind: 'retry'; why: string; at: string }
  | { kind: 'failed'; why: string; suppress: boolean };

/**
 * The dispatch worker: plans restocks into batches and sends the ledger's due alerts. Any
 * number may run against one database (inside `restock serve` or as `restock worker`); leases
 * keep them from planning a restock or sending an alert twice, and a dead worker's leases run
 * out so its alerts are retaken. At most `claimSize` alerts per worker are leased at a time,
 * which bounds what a crash can send twice.
 */
export class DispatchWorker {
  readonly id = `worker_${os.hostname()}_${process.pid}_${randomBytes(3).toString('hex')}`;
  private running = false;
  /** Set by stop(): take no more alerts, finish those in flight. turn() works without start(). */
  private stopping = false;
  private loop: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private readonly lastRun = new Map<string, number>();
  private readonly unsubscribeFromWork: () => void;

  constructor(private readonly deps: WorkerDeps) {
    this.unsubscribeFromWork = deps.dispatch.onWork(() => this.wake());
  }

  /** Whether the loop is on: `restock serve` with RUN_WORKER=false leaves it off. */
  get isRunning(): boolean {
    return this.running;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Stops taking work, lets the alerts in flight finish and records them. */
  async stop(): Promise<void> {
    this.running = false;
    this.stopping = true;
    this.wake();
    await this.loop;
    this.unsubscribeFromWork();
  }

  wake(): void {
    this.wakeUp?.();
  }

  /** Turns until a turn finds nothing to do now (alerts due later stay queued): for tests and tools. */
  async runUntilIdle(): Promise<void> {
    while ((await this.turn()) > 0) {
      /* keep turning */
    }
  }

  /** One pass over every kind of work; resolves to how much was done. */
  async turn(): Promise<number> {
    let done = await this.runJobs();
    done += await this.planDueRestocks();
    done += await this.sendDue();
    return done;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (this.running) {
      let done = 0;
      try {
        done = await this.turn();
        failures = 0;
      } catch (err) {
        failures++;
        this.deps.log.warn({ err, worker: this.id }, 'dispatch turn failed; retrying');
      }
      if (done === 0 && this.running) await this.sleep(failures > 0 ? Math.min(30_000, this.deps.config.pollMs * 2 ** failures) : this.deps.config.pollMs);
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wakeUp = done;
    });
  }

  private async runJobs(): Promise<number> {
    let done = 0;
    for (const job of this.deps.jobs) {
      if (job.everyMs !== undefined) {
        const last = this.lastRun.get(job.name) ?? 0;
        if (Date.now() - last < job.everyMs) continue;
        this.lastRun.set(job.name, Date.now());
      }
      try {
        done += await job.run();
      } catch (err) {
        this.deps.log.warn({ err, job: job.name }, 'worker job failed; it runs again next turn');
      }
    }
    return done;
  }

  // --- planning -----------------------------------------------------------------------------

  private async planDueRestocks(): Promise<number> {
    let planned = 0;
    for (let i = 0; i < RESTOCKS_PER_TURN; i++) {
      const now = new Date();
      const restock = await this.deps.store.claimDueRestock(this.id, now.toISOString(), this.leaseUntil(now));
      if (!restock) break;
      planned += await this.planBatch(restock, now);
    }
    return planned;
  }

  /**
   * Plans the restock's next batch: stock re-read, then the next stock × multiplier waiting
   * subscribers in signup order.
   */
  private async planBatch(restock: RestockRow, now: Date): Promise<number> {
    const { store, inventory, stores, alerts } = this.deps;
    const nowIso = now.toISOString();
    const stop = (status: string, reason: string) =>
      store.releaseRestock(this.id, restock.id, { status, stop_reason: reason, updated_at: nowIso }).then(() => 1);

    const { sending, settings } = await stores.sendingProfile(restock.store_domain);
    if (!sending) return stop('stopped', 'the store uninstalled the app');
    const stock = await inventory.stockOf(restock.store_domain, restock.product_id, restock.variant_id);
    if (!stock.published) return stop('unpublished', 'the product is not published');
    if (stock.available < settings.minStock) {
      return stop('sold_out', `${stock.available} in stock, below the minimum of ${settings.minStock}`);
    }

    const size = Math.max(1, Math.floor(stock.available * settings.batchMultiplier));
    const waiting = await alerts.waitingSubscribers({
      storeDomain: restock.store_domain,
      includeUnowned: restock.include_unowned === 1,
      productId: restock.product_id,
      variantId: restock.variant_id,
      after: restock.cursor_id && restock.cursor_created_at ? { createdAt: restock.cursor_created_at, id: restock.cursor_id } : null,
      limit: size,
    });
    if (waiting.length === 0) return stop('done', 'every waiting subscriber was alerted');

    const batch = restock.batches + 1;
    const rows: NotificationRow[] = waiting.map((subscriber, i) => ({
      id: newId('ntf'),
      restock_id: restock.id,
      subscription_id: subscriber.id,
      store_domain: restock.store_domain,
      email: subscriber.email,
      product_id: restock.product_id,
      variant_id: restock.variant_id,
      batch,
      position: restock.planned + i,
      status: 'queued',
      reason: whySent(restock, stock.available, settings, size, batch, subscriber.created_at, restock.planned + i),
      outcome: null,
      attempts: 0,
      next_attempt_at: nowIso,
      lease_owner: null,
      lease_until: null,
      created_at: nowIso,
      sent_at: null,
      locale: subscriber.locale,
    }));
    const last = waiting[waiting.length - 1]!;
    const finished = waiting.length < size;
    await store.queueBatch(this.id, restock, rows, {
      batches: batch,
      planned: restock.planned + rows.length,
      cursor_created_at: last.created_at,
      cursor_id: last.id,
      status: finished ? 'done' : 'dispatching',
      stop_reason: finished ? 'every waiting subscriber was alerted' : null,
      next_batch_at: new Date(now.getTime() + settings.batchIntervalSeconds * 1000).toISOString(),
      updated_at: nowIso,
    });
    return 1;
  }

  // --- sending ------------------------------------------------------------------------------

  /**
   * Sends every alert due now. Alerts stream through the transport (its pool keeps every
   * connection busy) while outcomes are written in groups; more are claimed once fewer than
   * half the lease window remain unsettled.
   */
  private async sendDue(): Promise<number> {
    const windowSize = this.deps.config.claimSize;
    const settling = new Settler(this.deps, this.id);
    const sending = new Set<Promise<void>>();
    // Woken when an alert is settled, instead of Promise.race over everything in flight.
    let wake: (() => void) | undefined;
    const wakeUp = () => {
      const resolve = wake;
      wake = undefined;
      resolve?.();
    };
    // Composed alerts wait here and go to the transport a few at a time, as sends finish: a
    // whole claim handed over at once keeps the event loop busy for tens of milliseconds while
    // every pooled connection waits for its reply to be read.
    const pending: Outgoing[] = [];
    let next = 0;
    const pump = () => {
      // Once stopping, nothing new is handed over; what is left stays leased and is retaken.
      while (!this.stopping && sending.size < MAX_OUTSTANDING_SENDS && next < pending.length) {
        const item = pending[next++]!;
        const promise = this.sendOne(item, settling).finally(() => {
          sending.delete(promise);
          pump();
          wakeUp();
        });
        sending.add(promise);
      }
      if (next >= 1000 || next === pending.length) {
        pending.splice(0, next);
        next = 0;
      }
    };
    let handled = 0;
    let exhausted = false;
    // A slow or stalled mail server must not let our leases lapse while we still hold the
    // alerts: another worker would retake and send them too.
    const renewal = setInterval(() => void this.renewLeases(settling), (this.deps.config.leaseSeconds * 1000) / 3);
    try {
      while (!this.stopping || sending.size > 0) {
        if (!this.stopping && !exhausted && settling.leased < windowSize / 2) {
          const now = new Date();
          const claimed = await this.deps.store.claimNotifications(this.id, now.toISOString(), this.leaseUntil(now), windowSize - settling.leased);
          if (claimed.length === 0) exhausted = true;
          else {
            handled += claimed.length;
            settling.hold(claimed);
            pending.push(...(await this.prepare(claimed, settling)));
            pump();
            continue;
          }
        }
        if (sending.size === 0 && next === pending.length) break;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      clearInterval(renewal);
      await Promise.allSettled(sending);
      await settling.flush();
    }
    return handled;
  }

  private async renewLeases(settling: Settler): Promise<void> {
    try {
      await this.deps.store.renewLeases(this.id, settling.heldIds(), this.leaseUntil(new Date()));
    } catch (err) {
      this.deps.log.warn({ err }, 'renewing alert leases failed; will retry');
    }
  }

  private async sendOne(item: Outgoing, settling: Settler): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    // Leases of alerts in flight are renewed, so a send that never settles would hold its alert
    // forever; past this limit it counts as a transient failure and is retried.
    const limit = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer from the mail server within ${SEND_LIMIT_MS / 1000} s`)), SEND_LIMIT_MS);
    });
    try {
      await Promise.race([item.transport.send(item.message), limit]);
      settling.record(item.row, { kind: 'sent' });
    } catch (err) {
      settling.record(item.row, this.failure(item.row, err));
      // Not sent: its place in the allowance goes back (a retry counts it again).
      if (item.quotaPeriod) await this.deps.quota.releaseAlerts(item.row.store_domain, item.quotaPeriod, 1).catch((error) => this.deps.log.warn({ err: error }, 'releasing an alert quota failed'));
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * A recipient the server refuses for good (5xx to RCPT TO) is suppressed; anything else, a
   * refused login included (the merchant can fix it), is retried with backoff and jitter.
   */
  private failure(row: NotificationRow, err: unknown): Outcome {
    const why = err instanceof Error ? err.message : String(err);
    if (err instanceof MailDeliveryError && err.recipientRefused) return { kind: 'failed', why: `refused by the mail server (${err.responseCode}): ${why}`, suppress: true };
    if (row.attempts >= this.deps.config.maxAttempts) return { kind: 'failed', why: `gave up after ${row.attempts} attempts: ${why}`, suppress: false };
    const base = this.deps.config.retryBaseMs * 2 ** (row.attempts - 1);
    const delay = Math.min(MAX_RETRY_DELAY_MS, base * (0.5 + Math.random()));
    return { kind: 'retry', why, at: new Date(Date.now() + delay).toISOString() };
  }

  /**
   * Checks a claimed group before anything goes out: the subscription still waits, the address
   * is not suppressed nor already mailed for this restock, the frequency cap allows it, the store
   * still sends and the product is still sellable. Settles the rest and returns what to send.
   */
  private async prepare(claimed: NotificationRow[], settling: Settler): Promise<Outgoing[]> {
    const { alerts, store } = this.deps;
    const active = await alerts.stillActive(claimed.map((row) => row.subscription_id));
    const alerted = await store.alreadySent(claimed.map((row) => row.subscription_id));
    const outgoing: Outgoing[] = [];
    for (const [storeDomain, rows] of groupBy(claimed, (row) => row.store_domain)) {
      const context = await this.storeContext(storeDomain, rows);
      const seenAddresses = new Set<string>();
      const seenSubscriptions = new Set<string>();
      const ready: Outgoing[] = [];
      for (const row of rows) {
        const check = this.check(row, context, { active, alerted, seenAddresses, seenSubscriptions });
        if (check) {
          settling.record(row, check);
          continue;
        }
        seenAddresses.add(`${row.restock_id}\n${row.email}`);
        seenSubscriptions.add(row.subscription_id);
        // Two alerts to one address in one group: the cap counts the first as sent now.
        if (!context.lastSent.has(row.email)) context.lastSent.set(row.email, new Date().toISOString());
        ready.push(this.compose(row, context));
      }
      if (ready.length > 0) outgoing.push(...(await this.withinAllowance(storeDomain, ready, context, settling)));
    }
    return outgoing;
  }

  /** What the store's plan allows goes out, in queue order; the rest waits, visibly, never dropped. */
  private async withinAllowance(storeDomain: string, ready: Outgoing[], context: StoreContext, settling: Settler): Promise<Outgoing[]> {
    const grant = await this.deps.quota.reserveAlerts(storeDomain, ready.length, context.ownMailProvider);
    const why = `${OVER_ALLOWANCE}${grant.reason ?? 'the plan allows no more alerts now'}`;
    for (const item of ready.slice(grant.granted)) settling.record(item.row, { kind: 'deferred', until: grant.retryAt, why });
    return ready.slice(0, grant.granted).map((item) => ({ ...item, quotaPeriod: grant.periodStart }));
  }

  private check(
    row: NotificationRow,
    context: StoreContext,
    seen: { active: Set<string>; alerted: Set<string>; seenAddresses: Set<string>; seenSubscriptions: Set<string> },
  ): Outcome | undefined {
    if (!context.sending) return { kind: 'skipped', why: 'the store uninstalled the app', notified: false };
    if (seen.alerted.has(row.subscription_id) || seen.seenSubscriptions.has(row.subscription_id)) {
      return { kind: 'skipped', why: 'this subscription was already alerted', notified: true };
    }
    if (!seen.active.has(row.subscription_id)) return { kind: 'skipped', why: 'the subscription no longer waits (unsubscribed, cancelled or notified)', notified: false };
    const suppression = context.suppressed.get(row.email);
    if (suppression) return { kind: 'skipped', why: `the address is suppressed for this store (${suppression})`, notified: false };
    const key = `${row.restock_id}\n${row.email}`;
    if (context.mailedForRestock.has(key) || seen.seenAddresses.has(key)) {
      return { kind: 'skipped', why: 'the address already got this restock’s alert', notified: true };
    }
    const product = context.products.get(productKey(row));
    if (!product?.sellable) return { kind: 'skipped', why: 'sold out (or unpublished) before this alert went out; the subscription keeps waiting', notified: false };
    const lastSent = context.lastSent.get(row.email);
    if (lastSent && context.capMs > 0) {
      const until = Date.parse(lastSent) + context.capMs;
      if (until > Date.now()) return { kind: 'deferred', until: new Date(until).toISOString() };
    }
    return undefined;
  }

  private async storeContext(storeDomain: string, rows: NotificationRow[]): Promise<StoreContext> {
    const { stores, store, inventory, senders } = this.deps;
    const emails = [...new Set(rows.map((row) => row.email))];
    const { sending, settings, smtpUrl } = await stores.sendingProfile(storeDomain);
    const capMs = settings.frequencyCapMinutes * 60_000;
    const lastSent = new Map<string, string>();
    const mailedForRestock = new Set<string>();
    const suppressed = new Map<string, string>();
    const restocks = new Set(rows.map((row) => row.restock_id));
    const since = new Date(Date.now() - capMs).toISOString();
    for (const chunk of chunks(emails)) {
      // With no cap, when an address was last mailed does not matter.
      for (const sent of capMs > 0 ? await store.recentlySent(storeDomain, chunk, since) : []) {
        if (sent.sent_at && (!lastSent.has(sent.email) || sent.sent_at > lastSent.get(sent.email)!)) lastSent.set(sent.email, sent.sent_at);
      }
      for (const restockId of restocks) {
        for (const email of await store.sentAddresses(storeDomain, restockId, chunk)) mailedForRestock.add(`${restockId}\n${email}`);
      }
      for (const [email, reason] of await store.suppressed(storeDomain, chunk)) suppressed.set(email, reason);
    }

    const products = new Map<string, ProductContext>();
    for (const row of rows) {
      const key = productKey(row);
      if (products.has(key)) continue;
      const stock = await inventory.stockOf(storeDomain, row.product_id, row.variant_id);
      const details = await inventory.describeProduct(storeDomain, row.product_id, row.variant_id);
      products.set(key, {
        sellable: stock.published && stock.available >= settings.minStock,
        title: details?.productTitle ?? 'The product you asked about',
        variantTitle: details?.variantTitle ?? null,
        url: details?.productUrl ?? null,
        imageUrl: details?.imageUrl ?? null,
      });
    }
    return {
      storeDomain,
      sending,
      ownMailProvider: smtpUrl !== undefined && smtpUrl !== null,
      settings,
      capMs,
      lastSent,
      mailedForRestock,
      suppressed,
      products,
      transport: senders.transportFor(storeDomain, smtpUrl),
      from: senders.fromFor(settings),
    };
  }

  private compose(row: NotificationRow, context: StoreContext): Outgoing {
    const product = context.products.get(productKey(row))!;
    const unsubscribeUrl = this.deps.alerts.unsubscribeUrl(row.subscription_id);
    const content = renderAlert(
      {
        shop: context.storeDomain,
        productTitle: product.title,
        variantTitle: product.variantTitle,
        productUrl: product.url,
        imageUrl: product.imageUrl,
        unsubscribeUrl,
        email: row.email,
      },
      { template: context.settings.template, locale: alertLocale(row.locale, context.settings.locale) },
    );
    return {
      row,
      transport: context.transport,
      message: {
        to: row.email,
        ...content,
        ...(context.from && { from: context.from }),
        // RFC 8058: mail clients offer one-click unsubscribe, POSTing to the link without cookies.
        headers: {
          'List-Unsubscribe': `<${unsubscribeUrl}>`,
          'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
          'X-Restock-Alert': row.id,
        },
        purpose: 'restock-alert',
        storeDomain: context.storeDomain,
      },
    };
  }

  private leaseUntil(now: Date): string {
    return new Date(now.getTime() + this.deps.config.leaseSeconds * 1000).toISOString();
  }
}

interface ProductContext {
  sellable: boolean;
  title: string;
  variantTitle: string | null;
  url: string | null;
  imageUrl: string | null;
}

interface StoreContext {
  storeDomain: string;
  sending: boolean;
  /** The store sends through its own SMTP provider (some plans require it). */
  ownMailProvider: boolean;
  settings: EffectiveSettings;
  capMs: number;
  lastSent: Map<string, string>;
  mailedForRestock: Set<string>;
  suppressed: Map<string, string>;
  products: Map<string, ProductContext>;
  transport: MailTransport;
  from: string | undefined;
}

/**
 * Collects outcomes and writes them in groups: sent alerts in one statement per group, their
 * subscriptions moved to notified right after. Until written, an alert stays leased; a crash
 * before that re-sends at most what was leased.
 */
class Settler {
  /** Alerts claimed and not yet recorded: still leased to this worker. */
  private readonly held = new Set<string>();
  private sent: NotificationRow[] = [];
  private others: Array<{ row: NotificationRow; outcome: Exclude<Outcome, { kind: 'sent' }> }> = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly deps: WorkerDeps,
    private readonly owner: string,
  ) {}

  get leased(): number {
    return this.held.size;
  }

  hold(rows: NotificationRow[]): void {
    for (const row of rows) this.held.add(row.id);
  }

  heldIds(): string[] {
    return [...this.held];
  }

  record(row: NotificationRow, outcome: Outcome): void {
    if (outcome.kind === 'sent') this.sent.push(row);
    else this.others.push({ row, outcome });
    if (this.sent.length + this.others.length >= FLUSH_SIZE) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), FLUSH_EVERY_MS);
  }

  /** Writes what was recorded; flushes run one after another so their order holds. */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const sent = this.sent;
    const others = this.others;
    this.sent = [];
    this.others = [];
    this.flushing = this.flushing
      .then(() => this.write(sent, others))
      .catch((err) => {
        // The rows stay leased but are no longer renewed: when the lease runs out they are
        // retaken and sent again, rather than lost.
        this.deps.log.error({ err }, 'recording alert outcomes failed');
      })
      .finally(() => {
        for (const row of sent) this.held.delete(row.id);
        for (const { row } of others) this.held.delete(row.id);
      });
    return this.flushing;
  }

  private async write(sent: NotificationRow[], others: Settler['others']): Promise<void> {
    if (sent.length === 0 && others.length === 0) return;
    const now = new Date().toISOString();
    const { store, alerts, dispatch } = this.deps;
    const notify = sent.map((row) => row.subscription_id);
    const updates = others.map(({ row, outcome }) => {
      if (outcome.kind === 'skipped' && outcome.notified) notify.push(row.subscription_id);
      return { id: row.id, changes: changesFor(row, outcome) };
    });
    await store.settle(this.owner, { ids: sent.map((row) => row.id), at: now }, updates, (trx) => alerts.markNotified(trx, notify));
    for (const { row, outcome } of others) {
      if (outcome.kind === 'failed' && outcome.suppress) await dispatch.suppress(row.store_domain, row.email, 'bounce', outcome.why);
    }
  }
}

function changesFor(row: NotificationRow, outcome: Exclude<Outcome, { kind: 'sent' }>): Partial<NotificationRow> {
  switch (outcome.kind) {
    case 'skipped':
      return { status: 'skipped', outcome: outcome.why };
    case 'deferred':
      // Waiting (for the frequency cap, or the plan's allowance) is not an attempt.
      return { status: 'queued', next_attempt_at: outcome.until, attempts: row.attempts - 1, outcome: outcome.why ?? 'waiting for the frequency cap' };
    case 'retry':
      return { status: 'queued', next_attempt_at: outcome.at, outcome: `will retry: ${outcome.why}` };
    case 'failed':
      return { status: 'failed', outcome: outcome.why };
  }
}

/** The "why sent" record a merchant reads in the audit. */
function whySent(restock: RestockRow, available: number, settings: EffectiveSettings, size: number, batch: number, signedUpAt: string, position: number): string {
  const what = restock.variant_id ?? restock.product_id;
  const source = restock.source_ref ? `${restock.source} ${restock.source_ref}` : restock.source;
  return (
    `${what} came back in stock at ${restock.store_domain} (detected ${restock.detected_at} from ${source}); ` +
    `batch ${batch}: ${available} in stock × ${settings.batchMultiplier} = up to ${size} alerts; ` +
    `subscriber #${position + 1} in signup order (signed up ${signedUpAt}).`
  );
}

function productKey(row: Pick<NotificationRow, 'product_id' | 'variant_id'>): string {
  return `${row.product_id}\n${row.variant_id ?? ''}`;
}

function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}


/** The shopper's language when they subscribed in one we write alerts in, else the store's. */
function alertLocale(shopper: string | null, store: EffectiveSettings['locale']): EffectiveSettings['locale'] {
  const parsed = localeSchema.safeParse(shopper);
  return parsed.success ? parsed.data : store;
}
