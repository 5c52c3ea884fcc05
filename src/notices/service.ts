import type { WaitingCount } from '../alerts/service.ts';
import { eventId, type EventSink } from '../core/events.ts';
import type { MailTransport } from '../core/mail/transport.ts';
import type { EffectiveSettings } from '../stores/schemas.ts';
import { waitlistNotice, weeklyDigest, type CrossedWaitlist } from './messages.ts';
import type { CrossingRow, NoticeRepository, NewCrossing, WaitlistKey } from './repository.ts';

/** A store's figures for a period, as the digest reports them. */
export interface DigestFigures {
  signups: number;
  sent: number;
  clicks: number;
  orders: number;
  /** Revenue won back, per currency (never summed across currencies). */
  revenue: { minor: number; currency: string }[];
}

/** The store's figures from `from` (inclusive) to `to` (exclusive), ISO 8601. */
export type DigestFiguresSource = (storeDomain: string, from: string, to: string) => Promise<DigestFigures>;

/** What a notice needs to name a product; the inventory feature knows it when the platform reported it. */
export type ProductTitles = (
  storeDomain: string,
  productId: string,
  variantId: string | null,
) => Promise<{ productTitle: string | null; variantTitle: string | null } | undefined>;

/** The stores feature, as far as notices need it. */
export interface NoticeStores {
  findStore(domain: string): Promise<{ domain: string; owner_email: string; status: string } | undefined>;
  settingsOf(domain: string): Promise<EffectiveSettings>;
  storesWithOwnSetting(
    setting: 'waitlistThreshold' | 'weeklyDigest',
    after: string | null,
    limit: number,
  ): Promise<{ stores: Array<{ domain: string; ownerEmail: string; settings: EffectiveSettings }>; next: string | null }>;
}

/** The alerts feature, as far as notices need it. */
export interface NoticeAlerts {
  waitingAtLeast(storeDomain: string, threshold: number, after: { productId: string; variantId: string | null } | null, limit?: number): Promise<WaitingCount[]>;
}

export interface NoticeTiming {
  /** A round over the stores with a threshold starts at most this often. */
  waitlistEveryMs: number;
  /** A round over the stores with the digest on (each checked for a digest due) starts at most this often. */
  digestCheckEveryMs: number;
  /** Stores visited per run of a job: the bound on one run's work. */
  storesPerRun: number;
}

export interface NoticeServiceDeps {
  repository: NoticeRepository;
  stores: NoticeStores;
  alerts: NoticeAlerts;
  events: EventSink;
  mail: MailTransport;
  figures: DigestFiguresSource;
  titles?: ProductTitles;
  baseUrl: string;
  timing: NoticeTiming;
}

/** The owner of a store with its settings in force: who is told, and by what rules. */
interface NoticedStore {
  domain: string;
  ownerEmail: string;
  settings: EffectiveSettings;
}

export const WEEK_MS = 7 * 24 * 3600 * 1000;
/** How long one worker holds a notice or digest it is sending; a dead worker's claim is retaken after it. */
const CLAIM_MS = 5 * 60 * 1000;
/** Waitlists read per query while comparing a store's with its crossings. */
const WAITLIST_PAGE = 500;

/**
 * Owner notices: a mail and a `waitlist.threshold` event when a waitlist reaches the store's
 * threshold (once per crossing), and the optional weekly digest. Both run as worker jobs that
 * visit the stores that set them, a page per run; the methods taking one store serve tests and
 * the operator.
 */
export class NoticeService {
  private readonly waitlistRound: StoreRound;
  private readonly digestRound: StoreRound;

  constructor(private readonly deps: NoticeServiceDeps) {
    const { stores, timing } = deps;
    this.waitlistRound = new StoreRound((after) => stores.storesWithOwnSetting('waitlistThreshold', after, timing.storesPerRun), timing.waitlistEveryMs);
    this.digestRound = new StoreRound((after) => stores.storesWithOwnSetting('weeklyDigest', after, timing.storesPerRun), timing.digestCheckEveryMs);
  }

  /**
   * One run of the waitlist job: the next page of stores with a threshold, each compared with
   * its crossings. Resolves to the stores visited (0 between rounds).
   */
  async noticeWaitlists(now = new Date()): Promise<number> {
    const page = await this.waitlistRound.next(now.getTime());
    await eachStore(page, (store) => this.checkStoreWaitlists(store, now));
    return page.length;
  }

  /** One run of the digest job: the next page of stores with the digest on, each sent its digest when due. */
  async sendDigests(now = new Date()): Promise<number> {
    const page = await this.digestRound.next(now.getTime());
    await eachStore(page, (store) => this.sendStoreDigest(store, now));
    return page.length;
  }

  /** One store's waitlists compared with its crossings now; resolves to the crossings told. */
  async checkWaitlists(storeDomain: string, now = new Date()): Promise<number> {
    const store = await this.noticedStore(storeDomain);
    return store ? this.checkStoreWaitlists(store, now) : 0;
  }

  /** One store's weekly digest, if it is on and due; resolves to whether it was sent. */
  async sendDigest(storeDomain: string, now = new Date()): Promise<boolean> {
    const store = await this.noticedStore(storeDomain);
    return store ? this.sendStoreDigest(store, now) : false;
  }

  /** `shop/redact`: the store's notice records go. */
  eraseStore(storeDomain: string): Promise<void> {
    return this.deps.repository.eraseStore(storeDomain);
  }

  private async noticedStore(storeDomain: string): Promise<NoticedStore | undefined> {
    const row = await this.deps.stores.findStore(storeDomain);
    if (row?.status !== 'active') return undefined;
    return { domain: row.domain, ownerEmail: row.owner_email, settings: await this.deps.stores.settingsOf(row.domain) };
  }

  /**
   * A crossing starts when a waitlist is found at or above the threshold without one, and ends
   * when it is found below: the next rise is a new crossing, told again. New crossings and every
   * crossing not yet told are claimed in the same commit, then told after it; a failure leaves
   * them untold, for the next run.
   */
  private async checkStoreWaitlists(store: NoticedStore, now: Date): Promise<number> {
    const threshold = store.settings.waitlistThreshold;
    if (threshold === null) return 0;
    const readAt = now.toISOString();
    const atOrAbove = await this.waitlistsAtLeast(store.domain, threshold);
    const known = await this.deps.repository.crossingsOf(store.domain);
    const knownKeys = new Set(known.map((row) => keyOf({ productId: row.product_id, variantKey: row.variant_key })));
    const currentKeys = new Set(atOrAbove.map((waitlist) => keyOf(waitlist)));
    const crossed: NewCrossing[] = atOrAbove.filter((waitlist) => !knownKeys.has(keyOf(waitlist))).map((waitlist) => ({ ...waitlist, threshold }));
    const dropped: WaitlistKey[] = known
      .filter((row) => !currentKeys.has(keyOf({ productId: row.product_id, variantKey: row.variant_key })))
      .map((row) => ({ productId: row.product_id, variantKey: row.variant_key }));
    const claimed = await this.deps.repository.recordCrossings(store.domain, {
      crossed,
      dropped,
      readAt,
      now: now.toISOString(),
      leaseUntil: new Date(now.getTime() + CLAIM_MS).toISOString(),
    });
    if (claimed.length === 0) return 0;
    try {
      await this.tellOwnerOfCrossings(store, claimed);
    } catch (err) {
      await this.deps.repository.releaseNotice(store.domain, claimed);
      throw err;
    }
    await this.deps.repository.markNoticed(store.domain, claimed, now.toISOString());
    return claimed.length;
  }

  /** Every waitlist of the store at or above the threshold, read a page at a time. */
  private async waitlistsAtLeast(storeDomain: string, threshold: number): Promise<Array<WaitlistKey & { waiting: number }>> {
    const all: Array<WaitlistKey & { waiting: number }> = [];
    let after: WaitingCount | null = null;
    for (;;) {
      const page: WaitingCount[] = await this.deps.alerts.waitingAtLeast(storeDomain, threshold, after, WAITLIST_PAGE);
      all.push(...page.map((count) => ({ productId: count.productId, variantKey: count.variantId ?? '', waiting: count.waiting })));
      if (page.length < WAITLIST_PAGE) return all;
      after = page.at(-1)!;
    }
  }

  /**
   * Events first, then one mail for all: an event announced again on a retry carries the same
   * id, which its sink delivers once; the mail is sent at least once.
   */
  private async tellOwnerOfCrossings(store: NoticedStore, crossings: CrossingRow[]): Promise<void> {
    const described: Array<CrossedWaitlist & { crossing: CrossingRow }> = [];
    for (const crossing of crossings) described.push({ ...(await this.describe(store.domain, crossing)), crossing });
    for (const waitlist of described) {
      const { crossing } = waitlist;
      await this.deps.events.announce({
        storeDomain: store.domain,
        type: 'waitlist.threshold',
        id: eventId('waitlist.threshold', store.domain, crossing.product_id, crossing.variant_key, crossing.crossed_at),
        occurredAt: crossing.crossed_at,
        data: {
          productId: crossing.product_id,
          variantId: waitlist.variantId,
          waiting: crossing.waiting,
          threshold: crossing.threshold,
          ...(waitlist.productTitle !== null && { productTitle: waitlist.productTitle }),
        },
      });
    }
    const threshold = Math.min(...crossings.map((crossing) => crossing.threshold));
    const mail = waitlistNotice(store.domain, threshold, described, this.dashboardUrl());
    await this.deps.mail.send({ to: store.ownerEmail, ...mail, purpose: 'waitlist-notice', storeDomain: store.domain });
  }

  private async describe(storeDomain: string, crossing: CrossingRow): Promise<CrossedWaitlist> {
    const variantId = crossing.variant_key === '' ? null : crossing.variant_key;
    const titles = await this.deps.titles?.(storeDomain, crossing.product_id, variantId);
    return {
      productId: crossing.product_id,
      variantId,
      productTitle: titles?.productTitle ?? null,
      variantTitle: titles?.variantTitle ?? null,
      waiting: crossing.waiting,
    };
  }

  /**
   * The digest covers the week before `now`, or less when the last digest ended later (a worker
   * back after a pause reports the last week, not every week it missed). Claimed before it is
   * sent, marked after: a failure sends it on the next run, a crash after sending may send it twice.
   */
  private async sendStoreDigest(store: NoticedStore, now: Date): Promise<boolean> {
    if (!store.settings.weeklyDigest) return false;
    const to = now.toISOString();
    const claim = await this.deps.repository.claimDigest(store.domain, to, WEEK_MS, new Date(now.getTime() + CLAIM_MS).toISOString());
    if (!claim) return false;
    const weekAgo = new Date(now.getTime() - WEEK_MS).toISOString();
    const from = claim.lastDigestAt !== null && claim.lastDigestAt > weekAgo ? claim.lastDigestAt : weekAgo;
    try {
      const figures = await this.deps.figures(store.domain, from, to);
      const mail = weeklyDigest({ storeDomain: store.domain, from, to, ...figures }, this.dashboardUrl());
      await this.deps.mail.send({ to: store.ownerEmail, ...mail, purpose: 'weekly-digest', storeDomain: store.domain });
    } catch (err) {
      await this.deps.repository.releaseDigest(store.domain);
      throw err;
    }
    await this.deps.repository.digestSent(store.domain, to);
    return true;
  }

  private dashboardUrl(): string {
    return `${this.deps.baseUrl}/dashboard`;
  }
}

/** One store's failure (its owner's mail server refusing, say) does not hold up the others; the first is reported after. */
async function eachStore(stores: NoticedStore[], visit: (store: NoticedStore) => Promise<unknown>): Promise<void> {
  const failures: unknown[] = [];
  for (const store of stores) {
    try {
      await visit(store);
    } catch (err) {
      failures.push(err);
    }
  }
  if (failures.length > 0) throw failures[0];
}

function keyOf(key: WaitlistKey): string {
  return `${key.productId}\n${key.variantKey}`;
}

/**
 * Walks the stores that set something, a page per run, and starts a new round at most every
 * `everyMs`: a round over many stores runs page after page (the worker turns again at once
 * while a job reports work), and between rounds a run does nothing.
 */
class StoreRound {
  private cursor: string | null = null;
  private inRound = false;
  private roundStartedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly page: (after: string | null) => Promise<{ stores: NoticedStore[]; next: string | null }>,
    private readonly everyMs: number,
  ) {}

  async next(nowMs: number): Promise<NoticedStore[]> {
    if (!this.inRound) {
      if (nowMs - this.roundStartedAt < this.everyMs) return [];
      this.inRound = true;
      this.roundStartedAt = nowMs;
      this.cursor = null;
    }
    const { stores, next } = await this.page(this.cursor);
    this.cursor = next;
    if (next === null) this.inRound = false;
    return stores;
  }
}
