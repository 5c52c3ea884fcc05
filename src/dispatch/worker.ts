import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import type { SubscriptionService } from '../alerts/service.ts';
import type { DispatchConfig } from '../config.ts';
import type { EventSink } from '../core/events.ts';
import type { Metrics } from '../core/metrics.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import type { ChannelSending } from '../core/channels.ts';
import type { ContactChannel } from '../channels.ts';
import type { WorkerJob } from '../core/jobs.ts';
import { BatchPlanner, type PlannerOptions } from './planner.ts';
import type { AllowanceGrant } from './rules.ts';
import { NotificationSender } from './sender.ts';
import type { NotificationSenders } from './senders.ts';
import type { DispatchService } from './service.ts';
import type { DispatchRepository } from './repository.ts';
import type { HoldKeeper } from './holds.ts';

/** What the dispatch worker asks of the inventory: a product's stock, description and the countries it is not sold in. */
export type WorkerInventory = Pick<InventoryService, 'stockOf' | 'describeProduct' | 'unlistedCountries'>;

/** What the dispatch worker asks of the subscriptions: who waits, whether they still do, their contact points and links, and what was sent. */
export type WorkerSubscriptions = Pick<SubscriptionService, 'waitingSubscribers' | 'stillActive' | 'stillNotified' | 'emailMuted' | 'contactPointsOf' | 'contactPointsByIds' | 'contactPointStopUrl' | 'shopperPageUrl' | 'unsubscribeUrl' | 'markNotified' | 'markAddressesNotified' | 'removeContactPoint'>;

/** What the dispatch worker asks of the stores: what sending for one takes. */
export type WorkerStores = Pick<StoreService, 'sendingProfile'>;

/** The store's allowance (the billing feature): how many of its alerts may go out now. */
export interface NotificationQuota {
  reserveNotifications(storeDomain: string, wanted: number, ownMailProvider: boolean): Promise<AllowanceGrant & { periodStart: string }>;
  releaseNotifications(storeDomain: string, periodStart: string, count: number): Promise<unknown>;
}

/**
 * What the conversions feature adds to an alert: the tracked link its product button carries,
 * and, for a reminder, whether the shopper has bought the product since the alert.
 */
export interface NotificationFollowUp {
  clickUrl(storeDomain: string, alertId: string): string;
  orderedSince(storeDomain: string, checks: Array<{ key: string; email: string; productId: string; variantId: string | null; since: string }>): Promise<Set<string>>;
}

export interface WorkerDeps {
  quota: NotificationQuota;
  followUp: NotificationFollowUp;
  /** Where `alert.sent` is announced (the store's outgoing webhooks). */
  events: EventSink;
  store: DispatchRepository;
  dispatch: DispatchService;
  alerts: WorkerSubscriptions;
  inventory: WorkerInventory;
  stores: WorkerStores;
  senders: NotificationSenders;
  config: DispatchConfig;
  log: FastifyBaseLogger;
  jobs: WorkerJob[];
  /** Each contact channel's sending (texts, browser push), by the channel's name; a channel without one is not sent. */
  channels?: Partial<Record<ContactChannel, ChannelSending>>;
  /** Where alerts planned and settled are counted. */
  metrics?: Metrics | undefined;
  /** Holds the units a restock's first batch announces, where the store asked for it and its platform can. */
  holds?: HoldKeeper;
}

/** The longest pause after failed turns, however many failed in a row. */
const MAX_BACKOFF_MS = 30_000;

/**
 * The dispatch worker: plans restocks into batches (planner.ts) and sends the ledger's due
 * alerts (sender.ts), and runs the background jobs other features hand it. Any number may run
 * against one database (inside `restock serve` or as `restock worker`); leases keep them from
 * planning a restock or sending an alert twice, and a dead worker's leases run out so its alerts
 * are retaken. At most `claimSize` alerts per worker are leased at a time, which bounds what a
 * crash can send twice.
 */
export class DispatchWorker {
  readonly id = `worker_${os.hostname()}_${process.pid}_${randomBytes(3).toString('hex')}`;
  private running = false;
  /** Set by stop(): take no more alerts, finish those in flight. turn() works without start(). */
  private stopping = false;
  private loop: Promise<void> | undefined;
  /** Ends the pause between turns, while the loop is in one. */
  private endPause: (() => void) | undefined;
  /** A wake-up came since the current turn began: the loop turns again without pausing. */
  private woken = false;
  private readonly lastRun = new Map<string, number>();
  private readonly unsubscribeFromWork: () => void;
  private readonly planner: BatchPlanner;
  private readonly sender: NotificationSender;
  /** The time the worker plans, checks, records and runs its jobs at (ms since the epoch). */
  private now: () => number = Date.now;

  constructor(
    private readonly deps: WorkerDeps,
    options: PlannerOptions = {},
  ) {
    const now = () => this.now();
    this.planner = new BatchPlanner({ ...deps, store: countingPlanned(deps.store, deps.metrics) }, this.id, now, options);
    this.sender = new NotificationSender(deps, this.id, () => this.stopping, now, () => this.planner.refill());
    this.unsubscribeFromWork = deps.dispatch.onWork(() => this.wake());
  }

  /**
   * Works as if the time were `now()` from here on, so tests can reach a time of day (quiet
   * hours) or a later day without waiting; undefined goes back to the real time.
   */
  setClock(now: (() => number) | undefined): void {
    this.now = now ?? Date.now;
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
    await this.planner.release();
    this.unsubscribeFromWork();
  }

  /**
   * New work is waiting: a pause ends now, and a wake-up during a turn is kept, so the next turn
   * starts at once instead of a poll interval later.
   */
  wake(): void {
    this.woken = true;
    this.endPause?.();
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
    done += await this.planner.planDue();
    done += await this.sender.sendDue();
    return done;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (this.running) {
      // Work that woke the worker before this turn began is work this turn sees.
      this.woken = false;
      let done = 0;
      try {
        done = await this.turn();
        failures = 0;
      } catch (err) {
        failures++;
        this.deps.log.warn({ err, worker: this.id }, 'dispatch turn failed; retrying');
      }
      if (done === 0 && this.running) await this.pause(this.pauseAfter(failures));
    }
  }

  /** The poll interval, or a backoff that doubles with each failed turn in a row. */
  private pauseAfter(failures: number): number {
    const { pollMs } = this.deps.config;
    return failures > 0 ? Math.min(MAX_BACKOFF_MS, pollMs * 2 ** failures) : pollMs;
  }

  private pause(ms: number): Promise<void> {
    if (this.woken) return Promise.resolve();
    return new Promise((resolve) => {
      const end = () => {
        clearTimeout(timer);
        this.endPause = undefined;
        resolve();
      };
      const timer = setTimeout(end, ms);
      this.endPause = end;
    });
  }

  private async runJobs(): Promise<number> {
    let done = 0;
    for (const job of this.deps.jobs) {
      if (!this.isDue(job)) continue;
      try {
        done += await job.run(new Date(this.now()));
      } catch (err) {
        this.deps.log.warn({ err, job: job.name }, 'worker job failed; it runs again next turn');
      }
    }
    return done;
  }

  /** Jobs without `everyMs` run on every turn; the others at most that often (a clock set back counts as time passed). */
  private isDue(job: WorkerJob): boolean {
    if (job.everyMs === undefined) return true;
    const now = this.now();
    const last = this.lastRun.get(job.name);
    if (last !== undefined && Math.abs(now - last) < job.everyMs) return false;
    this.lastRun.set(job.name, now);
    return true;
  }
}

/** The planner's repository, counting the alerts of each batch it queues (planned, by store). */
function countingPlanned(store: DispatchRepository, metrics: Metrics | undefined): DispatchRepository {
  if (!metrics?.enabled) return store;
  const counting = Object.create(store) as DispatchRepository;
  counting.queueBatch = async (owner, restock, rows, changes) => {
    const queued = await store.queueBatch(owner, restock, rows, changes);
    if (queued && rows[0]) metrics.alertsPlanned(rows[0].store_domain, rows.length);
    return queued;
  };
  return counting;
}
