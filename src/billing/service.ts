// Longer than most files on purpose: checkout at three providers and the plan states their events
// produce are one lifecycle (the state machine itself is apart, in plan-state.ts).
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { isoAfter, nowIso } from '../core/clock.ts';
import { newId } from '../core/ids.ts';
import { canSee, ownStore, storeForWrite, type Caller } from '../core/http/caller.ts';
import { Conflict, Forbidden, NotConfigured, NotFound, Problem } from '../core/problems.ts';
import type { PlanEvent } from './plan-state.ts';
import { formatPrice, planIds, type Plan, type PlanCatalogue, type PlanId } from './plans.ts';
import type { CheckoutSession } from './schemas.ts';
import type { BillingRepository, CheckoutSessionRow, StorePlanRow, UnreportedOverage } from './repository.ts';
import type { StripeBilling } from './stripe-billing.ts';

/** What other modules use of the plan catalogue. */
export { formatPrice, planIds, type Plan, type PlanId } from './plans.ts';

const MONTH_MS = 30 * 24 * 3600 * 1000;

/**
 * App billing: the billing of a platform whose app store requires its apps to charge through it
 * (Shopify Billing), offered by the platform's entry (`appBilling`, src/platform.ts). A store
 * installed as that platform's app buys its plans there, whoever asks, since the merchant approves
 * the charge in their own admin; any other way of paying is refused before anything is charged.
 */
export interface AppBilling {
  /** Its name, as checkout sessions and plan events record it, and as checkoutPlan's `approval` says it. */
  readonly provider: string;
  /** Its name for people: "completed at Shopify". */
  readonly label: string;
  /** Whether the store buys its plans through it (installed as the platform's app). */
  requiredFor(shop: string): Promise<boolean>;
  /**
   * Starts the purchase, named `appSubscriptionName(plan)`: the platform's page where the merchant
   * approves it, with usage charges for alerts beyond the allowance capped at `cappedAmountCents`
   * a period (none when 0).
   */
  createSubscription(shop: string, plan: Plan, returnUrl: string, cappedAmountCents: number): Promise<{ externalId: string; url: string }>;
  /** Bills alerts beyond the allowance under the subscription's capped amount. */
  reportUsage(shop: string, externalId: string, usage: UsageReport): Promise<void>;
  /** The refusal of another way of paying (`how`), which says where to go instead. */
  refusal(shop: string, how: string): Problem;
}

/** The platform's news about a store's app subscription, in billing's words. */
export interface AppSubscriptionNews {
  /** The platform's event type, as the plan events record it. */
  type: string;
  externalId: string | undefined;
  /** The subscription's name at the platform, which tells its plan when no checkout of ours started it. */
  name: string | undefined;
  status: PlanEvent['status'] | undefined;
  /** When the platform says it changed. */
  at: string | undefined;
  /** The capped amount of its usage charges, in cents (undefined: it has none). */
  cappedAmountCents: number | undefined;
}

/** Alerts beyond the allowance, as a provider is told of them: once per `idempotencyKey`. */
export interface UsageReport {
  alerts: number;
  amountCents: number;
  currency: 'USD';
  idempotencyKey: string;
  /** What the merchant reads on their bill. */
  description: string;
}

/** The name an app subscription is bought under, which tells its plan back. */
export function appSubscriptionName(plan: Pick<Plan, 'name'>): string {
  return `Restock ${plan.name}`;
}

export interface BillingOptions {
  store: BillingRepository;
  baseUrl: string;
  sessionTtlMinutes: number;
  catalogue: PlanCatalogue;
  checkoutProvider: 'local' | 'stripe';
  freeAlertsPerMonth: number;
  stripe?: StripeBilling;
  /** Tells a store's owner something about their plan (by e-mail). */
  tellMerchant?: (shop: string, subject: string, text: string) => Promise<void>;
  /** The owner's address of an active store (undefined: no such store, so nobody can accept a proposal for it). */
  ownerOf?: (shop: string) => Promise<string | undefined>;
  /** Mails a store's owner a proposal to accept; the text carries their one-time key. */
  askOwner?: (shop: string, owner: string, subject: string, text: string) => Promise<void>;
  /** App billing, for stores installed as that platform's app (absent when no platform's app is configured). */
  appBilling?: AppBilling;
  /** Gives back what was paid per request for a proposal its owner declined or let expire (the payments feature). */
  refundPayment?: RefundPayment;
}

/** Gives back what was paid per request for a checkout session; true when nothing paid for it is left unrefunded. */
export type RefundPayment = (sessionId: string) => Promise<boolean>;

/** What a store's plan allows in the current billing period. */
export interface Entitlement {
  plan: PlanId | 'free';
  status: 'active' | 'past_due' | 'none';
  monthlyAlertQuota: number;
  requiresOwnMailProvider: boolean;
  periodStart: string;
  periodEnd: string;
  /** Each alert beyond the allowance, in cents; 0 where none is billed (no plan, or a provider that bills none). */
  overageCentsPerAlert: number;
  /** The most the period's alerts beyond the allowance may cost, in cents (0: none go beyond it). */
  overageCeilingCents: number;
}

/** Periods reported to billing providers per run of the report job. */
const OVERAGE_REPORTS_PER_RUN = 100;
/** The share of the period's room (allowance and ceiling) after which the owner is warned, before anything is held. */
const WARN_AT_SHARE = 0.8;

/** The answer to "may these alerts go out now?": the first `granted` may; the rest wait until `retryAt`. */
export interface QuotaGrant {
  granted: number;
  periodStart: string;
  retryAt: string;
  /** Why the rest wait, for the alert ledger. */
  reason?: string;
}

/** A store's plan, its allowance and what the period used of it (`GET /api/v1/stores/{shop}`'s `plan`). */
export type PlanUsage = Omit<Entitlement, 'overageCentsPerAlert' | 'overageCeilingCents'> & {
  used: number;
  overage: { billed: boolean; pricePerAlert: number; ceiling: number; alerts: number; amount: number; currency: 'USD' };
};

/** A quota refusal is looked at again after this long: a plan bought meanwhile lifts it. */
const RECHECK_MS = 3600_000;
const BEFORE_ANY_PROVIDER_EVENT = new Date(0).toISOString();
/** Proposals mailed to one store's owner per hour, whoever makes them: beyond it they wait unmailed. */
const PROPOSAL_MAILS_PER_STORE_PER_HOUR = 5;
/** Payments per request that can be given back (MPP's Stripe charge); x402 transfers cannot, so none pays for a proposal. */
const REFUNDABLE = ['mpp'] as const;
const REFUNDS_PER_SWEEP = 100;
/** An owner key as handed out: 32 random bytes, base64url. */
const OWNER_KEY = /^[A-Za-z0-9_-]{43}$/;

/** What the hosted checkout page shows: the session, and whether its visitor holds the owner's key. */
export interface CheckoutView {
  session: CheckoutSession;
  /** The key in the URL is the owner's: the page may offer to accept, decline or complete. */
  owner: boolean;
  /** The agent that proposed it, when it awaits the owner (null: the owner's own checkout). */
  proposedBy: string | null;
  /** The key to carry in the page's forms, when `owner`. */
  key?: string;
}

/**
 * checkoutPlan and what follows it: the checkout providers (our hosted page in test mode, Stripe
 * Checkout, Shopify Billing), the provider events that move a store's plan through its states,
 * and what the plan in force allows.
 */
/** Who starts a checkout: an agent (bound to a store or not), or the store's owner in the dashboard (no agent). */
export type Buyer = Pick<Caller, 'storeDomain'> & { agentId: string | null };

export class BillingService {
  private readonly appBilling: AppBilling | undefined;
  private readonly refundPayment: RefundPayment | undefined;

  constructor(private readonly options: BillingOptions) {
    this.appBilling = options.appBilling;
    this.refundPayment = options.refundPayment;
  }

  plan(id: PlanId): Plan {
    return this.options.catalogue[id];
  }

  listPlans() {
    return planIds.map((plan) => {
      const p = this.options.catalogue[plan];
      return {
        plan,
        name: p.name,
        description: p.description,
        amount: p.amountCents / 100,
        currency: p.currency,
        interval: p.interval,
        monthlyAlertQuota: p.monthlyAlertQuota,
        requiresOwnMailProvider: p.requiresOwnMailProvider,
        overagePerAlert: p.overageCentsPerAlert / 100,
        defaultOverageCeiling: p.defaultOverageCeilingCents / 100,
        includes: p.includes,
      };
    });
  }

  /**
   * checkoutPlan: a new checkout session for the plan and store. Only the store's owner changes
   * what the store gets: a caller bound to the store (an agent its owner claimed, the owner in
   * the dashboard) starts the purchase at the store's provider; anyone else makes a proposal the
   * owner must accept first (they are mailed a one-time link), and nothing is bought or charged
   * until they do. A store that pays through app billing (installed as the Shopify app) is the
   * exception: its purchase starts at the platform whoever asks, because the merchant approves
   * the charge in their own admin, which is the owner's consent. A payment per request comes from
   * a payer bound to no store: with MPP (whose Stripe charge can be given back) it pays for a
   * proposal, refunded unless the owner accepts it; x402 (a transfer nobody can give back) is
   * refused, so it is never settled; neither is taken for a store that pays through app billing.
   */
  async checkoutPlan(input: { plan: PlanId; shop: string }, caller: Buyer, paidWith?: 'x402' | 'mpp'): Promise<CheckoutSession> {
    if (storeForWrite(caller, input.shop).foreign) {
      throw new Forbidden(`This agent is bound to ${caller.storeDomain} and cannot buy a plan for ${input.shop}.`);
    }
    const shop = input.shop.toLowerCase();
    if (paidWith !== undefined) await this.requireAppBilling(shop, `a plan paid per request with ${paidWith}`);
    if (paidWith !== undefined && !(REFUNDABLE as readonly string[]).includes(paidWith)) {
      throw new Forbidden(
        `Only the owner of ${shop} changes its plan, so a plan paid per request is a proposal that is refunded unless the owner accepts it, and an ${paidWith} payment cannot be refunded: nothing was charged. ` +
          'Pay with MPP instead, or register an agent (POST /api/agent/register) and call checkoutPlan with its token to propose the plan for free.',
      );
    }
    const now = new Date();
    const plan = this.plan(input.plan);
    // Paid per request: the payment is the purchase, so no provider takes part.
    const provider = paidWith ?? (await this.providerFor(shop));
    const owner = await this.options.ownerOf?.(shop);
    const byOwner = paidWith === undefined && caller.storeDomain === shop;
    // The platform asks the merchant to approve the charge: no proposal of ours needs to come first.
    const startsNow = byOwner || provider === this.appBilling?.provider;
    // The local page needs the owner's key to complete; a proposal needs it to be accepted.
    const key = owner !== undefined && (provider === 'local' || !startsNow) ? ownerKey() : undefined;
    const row: CheckoutSessionRow = {
      id: newId('cs'),
      plan: input.plan,
      shop,
      status: startsNow ? 'open' : 'awaiting_owner',
      provider,
      amount_cents: plan.amountCents,
      currency: plan.currency,
      created_at: now.toISOString(),
      expires_at: isoAfter(this.options.sessionTtlMinutes * 60_000, now),
      completed_at: null,
      agent_id: caller.agentId,
      external_id: null,
      external_url: null,
      accepted_at: byOwner ? now.toISOString() : null,
      owner_key_hash: key === undefined ? null : hashKey(key),
      owner_email: owner ?? null,
      proposal_mailed_at: null,
      refunded_at: null,
    };
    if (!startsNow) {
      await this.options.store.createSession(row);
      if (owner !== undefined && key !== undefined) await this.askOwner(row, owner, key, plan);
      return this.present(row);
    }
    // The provider first: a checkout it refused leaves no session of ours behind.
    const started = await this.startAtProvider(row, plan);
    const session = { ...row, external_id: started?.externalId ?? null, external_url: started?.url ?? null };
    await this.options.store.createSession(session);
    await this.recordPending(session, started?.externalId ?? row.id);
    return this.withKey(this.present(session), session, key);
  }

  /**
   * Mails the owner a proposal, at most PROPOSAL_MAILS_PER_STORE_PER_HOUR an hour per store so
   * that proposals cannot flood them. A mail that fails leaves the proposal unmailed: it expires
   * unaccepted, and the owner can still choose a plan in the dashboard.
   */
  private async askOwner(row: CheckoutSessionRow, owner: string, key: string, plan: Plan): Promise<void> {
    const since = new Date(Date.now() - 3600_000).toISOString();
    if ((await this.options.store.proposalsMailedSince(row.shop, since)) >= PROPOSAL_MAILS_PER_STORE_PER_HOUR) return;
    const link = `${this.options.baseUrl}/checkout/${row.id}?owner_key=${key}`;
    const mailProvider = plan.requiresOwnMailProvider
      ? `\nThe ${plan.name} plan sends alerts only through your own e-mail provider: until you set one (dashboard Settings), your shoppers' alerts wait.\n`
      : '';
    const terms = isPaid(row)
      ? `The proposer has paid its first month: accepting activates it at once; declining, or letting it expire, refunds them. You are charged nothing.\n`
      : `Nothing changes and nothing is charged unless you accept it.\n`;
    const text =
      `An agent (${row.agent_id ?? 'unknown'}) proposes the Restock ${plan.name} plan (${formatPrice(plan.amountCents, plan.currency)} a month) for ${row.shop}.\n` +
      `${terms}${mailProvider}\n` +
      `Review the proposal, then accept or decline it (the link works until ${row.expires_at}):\n${link}\n\n` +
      `If you did not expect this, ignore this e-mail or decline: your plan stays as it is.\n`;
    try {
      await this.options.askOwner?.(row.shop, owner, `Restock: accept the ${plan.name} plan for ${row.shop}?`, text);
    } catch {
      return;
    }
    await this.options.store.markProposalMailed(row.id, nowIso());
  }

  /** Without a caller: the hosted page, which anyone holding the session's URL may open. */
  async getCheckoutSession(id: string, caller?: Caller): Promise<CheckoutSession> {
    const row = await this.options.store.findSession(id);
    if (!row || (caller && !canSee(caller, { agentId: row.agent_id, storeDomain: row.shop }))) {
      throw new NotFound(`No checkout session ${id}.`);
    }
    return this.present(row);
  }

  /**
   * What the hosted page shows for `key` (from the page's URL): only the owner's key, for the
   * owner who holds the store now, lets the page offer to accept, decline or complete.
   */
  async checkoutView(id: string, key: string | undefined): Promise<CheckoutView> {
    const row = await this.options.store.findSession(id);
    if (!row) throw new NotFound(`No checkout session ${id}.`);
    const owner = key !== undefined && (await this.isOwnerKey(row, key));
    return {
      session: this.present(row),
      owner,
      proposedBy: row.accepted_at === null ? row.agent_id : null,
      ...(owner ? { key } : {}),
    };
  }

  /**
   * The owner accepts a proposal with their key: the purchase starts at the store's provider,
   * and the answer is where to go on: the provider's page, or ours with a fresh key (the one
   * used is spent). Nothing was started at the provider before this.
   */
  async acceptProposal(id: string, key: string | undefined): Promise<string> {
    const row = await this.proposalFor(id, key);
    // Made before the store installed the platform's app: it may no longer be bought this way.
    await this.requireAppBilling(row.shop, `a plan ${isPaid(row) ? `paid per request with ${row.provider}` : `bought at ${row.provider}`}`);
    if (isPaid(row)) {
      // Already paid for: accepting is the purchase, and the plan is active at once.
      const completed = await this.options.store.completeSession(id, row.owner_key_hash!, nowIso(), isoAfter(MONTH_MS), true);
      if (completed?.status !== 'completed') throw new Conflict(`Checkout session ${id} was accepted, declined or expired meanwhile.`);
      return `${this.options.baseUrl}/checkout/${id}`;
    }
    const plan = this.plan(row.plan as PlanId);
    const started = await this.startAtProvider(row, plan);
    const next = row.provider === 'local' ? ownerKey() : undefined;
    const now = nowIso();
    const accepted = await this.options.store.acceptProposal(
      id,
      row.owner_key_hash!,
      { accepted_at: now, owner_key_hash: next === undefined ? null : hashKey(next), external_id: started?.externalId ?? null, external_url: started?.url ?? null },
      now,
    );
    if (!accepted) throw new Conflict(`Checkout session ${id} was accepted, declined or expired meanwhile.`);
    await this.recordPending(accepted, started?.externalId ?? id);
    return started?.url ?? `${this.options.baseUrl}/checkout/${id}?owner_key=${next}`;
  }

  /** The owner declines a proposal: it can no longer be accepted, and nothing changes. */
  async declineProposal(id: string, key: string | undefined): Promise<CheckoutSession> {
    const row = await this.proposalFor(id, key);
    const declined = await this.options.store.declineProposal(id, row.owner_key_hash!);
    if (!declined) throw new Conflict(`Checkout session ${id} was accepted, declined or expired meanwhile.`);
    if (isPaid(declined)) await this.refund(declined.id);
    return this.present(declined);
  }

  /**
   * Refunds the proposals paid per request that their store's owner declined or let expire (a
   * worker job; a decline also refunds at once). Each is claimed before its refund, so an
   * acceptance and a refund never both happen, and none is refunded twice.
   */
  async refundUndelivered(now = new Date()): Promise<number> {
    const rows = await this.options.store.undeliveredPaidProposals(REFUNDABLE, now.toISOString(), REFUNDS_PER_SWEEP);
    let refunded = 0;
    for (const row of rows) if (await this.refund(row.id, now)) refunded++;
    return refunded;
  }

  /** One paid proposal's refund, if it is still due; a refund that fails is due again at the next sweep. */
  private async refund(id: string, now = new Date()): Promise<boolean> {
    if (!this.refundPayment || !(await this.options.store.claimRefund(id, now.toISOString()))) return false;
    let done = false;
    try {
      done = await this.refundPayment(id);
    } catch {
      // Stripe out of reach: the claim is released below and the next sweep tries again.
    }
    if (!done) await this.options.store.releaseRefund(id);
    return done;
  }

  /**
   * Completes a test-mode purchase on our hosted page, for the owner's key only (which it uses
   * up); the store's plan becomes active. Completing a completed session again is harmless.
   */
  async completeTestCheckout(id: string, key?: string): Promise<CheckoutSession> {
    const existing = await this.options.store.findSession(id);
    if (!existing) throw new NotFound(`No checkout session ${id}.`);
    if (existing.provider !== 'local') {
      throw new Problem('conflict', `Checkout session ${id} is completed at ${existing.provider}, not on this page.`);
    }
    const current = this.present(existing);
    if (current.status === 'completed') return current;
    if (current.status === 'expired') throw new Problem('checkout-expired', `Checkout session ${id} expired at ${existing.expires_at}.`);
    if (current.status === 'awaiting_owner') throw new Forbidden(`Checkout session ${id} is a proposal: only the store's owner can accept it, from the link Restock mailed them.`);
    if (current.status === 'declined') throw new Conflict(`Checkout session ${id} was declined by the store's owner.`);
    if (key === undefined || !(await this.isOwnerKey(existing, key))) {
      throw new Forbidden(`Only the owner of ${existing.shop} completes this checkout, with the link they were given.`);
    }
    const row = await this.options.store.completeSession(id, hashKey(key), nowIso(), isoAfter(MONTH_MS));
    if (!row) throw new NotFound(`No checkout session ${id}.`);
    const session = this.present(row);
    if (session.status === 'expired') {
      throw new Problem('checkout-expired', `Checkout session ${id} expired at ${row.expires_at}.`);
    }
    return session;
  }

  /** A proposal the key may accept or decline: awaiting the owner, unexpired, and the key theirs. */
  private async proposalFor(id: string, key: string | undefined): Promise<CheckoutSessionRow> {
    const row = await this.options.store.findSession(id);
    if (!row) throw new NotFound(`No checkout session ${id}.`);
    const status = this.present(row).status;
    if (status === 'expired') throw new Problem('checkout-expired', `Checkout session ${id} expired at ${row.expires_at}.`);
    if (status !== 'awaiting_owner') throw new Conflict(`Checkout session ${id} is ${status}: there is no proposal left to answer.`);
    if (key === undefined || !(await this.isOwnerKey(row, key))) {
      throw new Forbidden(`Only the owner of ${row.shop} answers this proposal, with the link Restock mailed them.`);
    }
    return row;
  }

  /** The key is the session's, unspent, and made for the owner who holds the store now. */
  private async isOwnerKey(row: CheckoutSessionRow, key: string): Promise<boolean> {
    if (!row.owner_key_hash || !OWNER_KEY.test(key)) return false;
    const given = Buffer.from(hashKey(key));
    const expected = Buffer.from(row.owner_key_hash);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return false;
    return row.owner_email !== null && (await this.options.ownerOf?.(row.shop)) === row.owner_email;
  }

  /** The session as its creator gets it: the local page's URL carries the owner's key. */
  private withKey(session: CheckoutSession, row: CheckoutSessionRow, key: string | undefined): CheckoutSession {
    if (key === undefined || row.external_url !== null) return session;
    return { ...session, checkoutUrl: `${session.checkoutUrl}?owner_key=${key}` };
  }

  /**
   * The allowance in force: an active plan (or one whose payment failed, during the provider's
   * retries) gives its quota for its billing period; otherwise the free allowance per calendar
   * month (UTC).
   */
  async entitlement(shop: string, now = new Date()): Promise<Entitlement> {
    const row = await this.options.store.planOf(shop);
    if (row && (row.status === 'active' || row.status === 'past_due') && Object.hasOwn(this.options.catalogue, row.plan)) {
      const plan = this.plan(row.plan as PlanId);
      const period = billingPeriod(row.period_start, row.period_end, now);
      const billed = this.billsOverageAt(row.provider);
      const ceiling = billed ? await this.overageCeilingOf(row, plan) : 0;
      return {
        plan: row.plan as PlanId,
        status: row.status,
        monthlyAlertQuota: plan.monthlyAlertQuota,
        requiresOwnMailProvider: plan.requiresOwnMailProvider,
        ...period,
        overageCentsPerAlert: billed ? plan.overageCentsPerAlert : 0,
        overageCeilingCents: ceiling,
      };
    }
    // No plan, nobody to bill: the free allowance is all there is.
    return { plan: 'free', status: 'none', monthlyAlertQuota: this.options.freeAlertsPerMonth, requiresOwnMailProvider: false, ...calendarMonth(now), overageCentsPerAlert: 0, overageCeilingCents: 0 };
  }

  /**
   * Takes up to `wanted` alerts from the store's allowance, then beyond it at the plan's price per
   * alert up to the owner's ceiling. None go out for a plan that sends only through the store's
   * own provider while it has none; past the ceiling the rest wait. The owner is warned once per
   * period when the room is running out, before anything waits, and told once when alerts wait.
   */
  async reserveNotifications(shop: string, wanted: number, ownMailProvider: boolean, now = new Date()): Promise<QuotaGrant> {
    const entitlement = await this.entitlement(shop, now);
    const retryAt = new Date(Math.min(Date.parse(entitlement.periodEnd), now.getTime() + RECHECK_MS)).toISOString();
    if (entitlement.requiresOwnMailProvider && !ownMailProvider) {
      const reason = `waiting: the ${entitlement.plan} plan sends through the store's own e-mail provider, and none is set (PATCH /api/v1/stores/${shop} with smtpUrl)`;
      await this.tell(shop, entitlement.periodStart, 'Restock: alerts are waiting for your e-mail provider', `${reason}.\nYour shoppers' alerts are kept and go out as soon as it is set.`, now);
      return { granted: 0, periodStart: entitlement.periodStart, retryAt, reason };
    }
    const room = entitlement.monthlyAlertQuota + overageRoom(entitlement);
    const { granted, used } = await this.options.store.reserveUsage(shop, entitlement.periodStart, entitlement.monthlyAlertQuota, room, wanted);
    if (granted === wanted) {
      if (used >= room * WARN_AT_SHARE) await this.warn(shop, entitlement, used, room, now);
      return { granted, periodStart: entitlement.periodStart, retryAt };
    }
    const reason = overageRoom(entitlement) > 0
      ? `waiting: the ${entitlement.plan} allowance of ${entitlement.monthlyAlertQuota} alerts and the overage ceiling of ${formatPrice(entitlement.overageCeilingCents, 'USD')} are used up until ${entitlement.periodEnd}`
      : `waiting: the ${entitlement.plan} allowance of ${entitlement.monthlyAlertQuota} alerts is used up until ${entitlement.periodEnd}`;
    const remedy = entitlement.overageCentsPerAlert > 0 ? 'raise the overage ceiling (dashboard, Plan), or choose a larger plan' : 'choose a plan with a larger allowance';
    await this.tell(shop, entitlement.periodStart, 'Restock: your alerts are waiting', `${reason}.\nAlerts beyond it are kept, not dropped: they go out when the next period starts, or at once if you ${remedy}.`, now);
    return { granted, periodStart: entitlement.periodStart, retryAt, reason };
  }

  /**
   * Where alerts beyond the allowance are billed: recorded on the hosted test page (test mode),
   * reported to Stripe as meter events, to the platform's app billing as usage charges. A plan held
   * elsewhere (paid per request) has no overage: its alerts wait at the allowance.
   */
  private billsOverageAt(provider: string): boolean {
    return provider === 'local' || (provider === 'stripe' && this.options.stripe !== undefined) || provider === this.appBilling?.provider;
  }

  /**
   * The owner's ceiling (or the plan's default), and never more than the capped amount the merchant
   * approved at app billing: beyond it the platform refuses to bill, so nothing goes beyond it.
   */
  private async overageCeilingOf(row: StorePlanRow, plan: Plan): Promise<number> {
    const ceiling = (await this.options.store.overageCeiling(row.shop)) ?? plan.defaultOverageCeilingCents;
    if (row.provider !== this.appBilling?.provider) return ceiling;
    return Math.min(ceiling, (await this.options.store.overageCap(row.shop, row.provider, row.external_id)) ?? 0);
  }

  /**
   * Tells each store's billing provider of the alerts beyond the allowance it has not been told of
   * (the report job). Each report is claimed first, so no alert is billed twice by concurrent
   * workers; one that fails is given back and tried at the next run, under the same idempotency
   * key (the provider keeps it once if it did arrive). Returns how many periods were reported.
   */
  async reportOverage(): Promise<number> {
    const providers = ['stripe', this.appBilling?.provider].filter((provider): provider is string => provider !== undefined && this.billsOverageAt(provider));
    const rows = await this.options.store.unreportedOverage(providers, OVERAGE_REPORTS_PER_RUN);
    let reported = 0;
    for (const row of rows) if (await this.reportOverageOf(row)) reported++;
    return reported;
  }

  private async reportOverageOf(row: UnreportedOverage): Promise<boolean> {
    const { shop, period_start: periodStart, overage_reported: from, overage: to } = row;
    if (!Object.hasOwn(this.options.catalogue, row.plan) || !(await this.options.store.claimOverage(shop, periodStart, from, to))) return false;
    const cents = this.plan(row.plan as PlanId).overageCentsPerAlert;
    const usage: UsageReport = {
      alerts: to - from,
      amountCents: (to - from) * cents,
      currency: 'USD',
      idempotencyKey: `restock-overage-${createHash('sha256').update(`${shop} ${periodStart} ${from} ${to}`).digest('base64url').slice(0, 32)}`,
      description: `${to - from} back-in-stock alerts beyond the ${row.plan} allowance at ${formatPrice(cents, 'USD')} each (period from ${periodStart.slice(0, 10)})`,
    };
    try {
      if (row.provider === 'stripe') await this.options.stripe!.reportUsage(row.external_id, usage);
      else await this.appBilling!.reportUsage(shop, row.external_id, usage);
      return true;
    } catch {
      // The provider was out of reach or refused: the alerts are reported at the next run.
      await this.options.store.unclaimOverage(shop, periodStart, from, to);
      return false;
    }
  }

  /** Warns the owner, once per period, that the period's room is running out: what is left, and what lifts it. */
  private async warn(shop: string, entitlement: Entitlement, used: number, room: number, now: Date): Promise<void> {
    if (!(await this.options.store.markWarned(shop, entitlement.periodStart, now.toISOString()))) return;
    const billed = entitlement.overageCentsPerAlert > 0;
    const terms = billed
      ? `Beyond your allowance of ${entitlement.monthlyAlertQuota}, alerts cost ${formatPrice(entitlement.overageCentsPerAlert, 'USD')} each, up to your ceiling of ${formatPrice(entitlement.overageCeilingCents, 'USD')} this period.`
      : `Your allowance is ${entitlement.monthlyAlertQuota} alerts this period.`;
    const remedy = billed ? 'Raise the overage ceiling (dashboard, Plan) or choose a larger plan' : 'Choose a plan';
    await this.sendNotice(
      shop,
      'Restock: your alerts this period are running out',
      `${used} of the ${room} alerts ${shop} can send until ${entitlement.periodEnd} are used. ${terms}\n${remedy} before your shoppers' alerts have to wait.`,
    );
  }

  releaseNotifications(shop: string, periodStart: string, count: number): Promise<unknown> {
    return this.options.store.releaseUsage(shop, periodStart, count);
  }

  /** The plan in force, its allowance, the alerts counted against it in the current period and what those beyond it cost. */
  async planUsage(shop: string, now = new Date()): Promise<PlanUsage> {
    const { overageCentsPerAlert, overageCeilingCents, ...entitlement } = await this.entitlement(shop, now);
    const { used, overage } = await this.options.store.usage(shop, entitlement.periodStart);
    return {
      ...entitlement,
      used,
      overage: {
        billed: overageCentsPerAlert > 0,
        pricePerAlert: overageCentsPerAlert / 100,
        ceiling: overageCeilingCents / 100,
        alerts: overage,
        amount: (overage * overageCentsPerAlert) / 100,
        currency: 'USD',
      },
    };
  }

  /**
   * The most a period's alerts beyond the allowance may cost the store, set by its owner's side
   * (an agent bound to the store, the owner in the dashboard). It applies from the next alert;
   * lowered below what the period has already spent, nothing more goes beyond the allowance.
   */
  async setOverageCeiling(caller: Caller, shop: string, ceilingCents: number): Promise<PlanUsage> {
    const own = ownStore(caller, shop);
    await this.options.store.setOverageCeiling(own, ceilingCents, nowIso());
    return this.planUsage(own);
  }

  /** `planUsage`, for a caller bound to the store. */
  async planUsageFor(caller: Caller, shop: string, now = new Date()) {
    return this.planUsage(ownStore(caller, shop), now);
  }

  /** Tells the merchant once per period, whichever worker gets there first. */
  private async tell(shop: string, periodStart: string, subject: string, text: string, now: Date): Promise<void> {
    if (await this.options.store.markNoticeSent(shop, periodStart, now.toISOString())) await this.sendNotice(shop, subject, text);
  }

  private async sendNotice(shop: string, subject: string, text: string): Promise<void> {
    try {
      await this.options.tellMerchant?.(shop, subject, text);
    } catch {
      // The alerts wait either way; the notice is a courtesy that must not stop dispatch.
    }
  }

  /** The plan a store holds (undefined: none). */
  planOf(shop: string): Promise<StorePlanRow | undefined> {
    return this.options.store.planOf(shop);
  }

  /**
   * A Stripe webhook delivery: verified (signature and age) by the SDK, then applied once.
   * Returns what it did, for the answer and the log.
   */
  async stripeWebhook(payload: Buffer, signature: string | undefined): Promise<string> {
    const stripe = this.options.stripe;
    if (!stripe?.verifiesWebhooks) throw new Problem('not-configured', 'Stripe webhooks need STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET.');
    if (!signature) throw new Problem('invalid-webhook', 'A Stripe delivery carries a Stripe-Signature header; this one has none.');
    let event;
    try {
      event = stripe.verify(payload, signature);
    } catch {
      throw new Problem('invalid-webhook', 'The Stripe-Signature does not match the body under the webhook secret, or the delivery is older than 5 minutes.');
    }
    const mapped = await stripe.planEvent(event);
    const now = nowIso();
    if (typeof mapped === 'string') return this.options.store.applyEvent('stripe', event.id, event.type, undefined, now, mapped);
    if (event.type === 'checkout.session.completed' && mapped.checkoutSessionId) {
      await this.options.store.markCompleted(mapped.checkoutSessionId, now);
    }
    return this.options.store.applyEvent('stripe', event.id, event.type, mapped, now);
  }

  /** The app billing platform's news about a store's subscription: applied once per event id, in any order. */
  async appSubscriptionChanged(shop: string, eventId: string, news: AppSubscriptionNews): Promise<string> {
    const now = nowIso();
    const provider = this.appBilling?.provider;
    if (!provider) throw new NotConfigured('No platform bills stores through its app store here.');
    const { externalId, status } = news;
    if (!externalId || !status) return this.options.store.applyEvent(provider, eventId, news.type, undefined, now, 'no subscription id or status');
    const session = await this.options.store.findSessionByExternal(externalId);
    const held = await this.options.store.planByExternal(provider, externalId);
    const plan = session?.plan ?? held?.plan ?? planIds.find((id) => news.name === appSubscriptionName(this.plan(id)));
    if (!plan) return this.options.store.applyEvent(provider, eventId, news.type, undefined, now, `an app subscription not bought through Restock (${news.name ?? 'unnamed'})`);
    const at = news.at ?? now;
    if (status === 'active' && news.cappedAmountCents !== undefined) await this.options.store.setOverageCap(shop, provider, externalId, news.cappedAmountCents, now);
    // Active means the merchant approved the charge in their own admin: the owner's choice.
    if (status === 'active' && session) await this.options.store.markCompleted(session.id, now, { approvedByOwner: true });
    const event: PlanEvent = {
      shop,
      plan,
      status,
      provider,
      externalId,
      at,
      // The period starts when the subscription first becomes active; a recovery keeps it.
      ...(status === 'active' && (!held || held.status === 'pending') ? { periodStart: at, periodEnd: isoAfter(MONTH_MS, new Date(at)) } : {}),
      checkoutSessionId: session?.id ?? null,
    };
    return this.options.store.applyEvent(provider, eventId, news.type, event, now);
  }

  /**
   * A store that pays through app billing (installed as the Shopify app) pays for its plans there
   * only, as that platform's app store requires: `how` (any other way of paying) is refused before
   * anything is charged, with where to go instead.
   */
  async requireAppBilling(shop: string, how: string): Promise<void> {
    if (await this.paysThroughAppBilling(shop)) throw this.appBilling!.refusal(shop, how);
  }

  /** Where a purchase is completed, for people: "completed at Shopify". */
  providerLabel(provider: string): string {
    return provider === this.appBilling?.provider ? this.appBilling.label : 'Stripe';
  }

  /** checkoutPlan's `approval`: the platform whose admin approves the charge, when it is app billing. */
  approvalOf(session: CheckoutSession): string | undefined {
    return session.provider === this.appBilling?.provider ? session.provider : undefined;
  }

  private async paysThroughAppBilling(shop: string): Promise<boolean> {
    return this.appBilling !== undefined && (await this.appBilling.requiredFor(shop.toLowerCase()));
  }

  private async providerFor(shop: string): Promise<string> {
    if (await this.paysThroughAppBilling(shop)) return this.appBilling!.provider;
    return this.options.checkoutProvider;
  }

  private async startAtProvider(row: CheckoutSessionRow, plan: Plan): Promise<{ externalId: string; url: string } | undefined> {
    let started: { externalId: string; url: string } | undefined;
    try {
      if (row.provider === 'stripe') started = await this.options.stripe!.startCheckout(row, plan);
      if (row.provider === this.appBilling?.provider) {
        const cap = (await this.options.store.overageCeiling(row.shop)) ?? plan.defaultOverageCeilingCents;
        started = await this.appBilling.createSubscription(row.shop, plan, `${this.options.baseUrl}/checkout/${row.id}`, plan.overageCentsPerAlert > 0 ? cap : 0);
      }
    } catch (err) {
      if (err instanceof Problem) throw err;
      throw new Problem('upstream-failed', `The checkout could not be started at ${row.provider}: ${(err as Error).message.split('\n')[0]}`);
    }
    return started;
  }

  /**
   * none → pending: the store has started buying (a plan in force is kept until the new one is
   * active). Dated at the epoch, not by our clock: the provider's own news about the purchase
   * must always count as newer, even in the same second or from a clock running behind ours.
   */
  private async recordPending(row: CheckoutSessionRow, externalId: string): Promise<void> {
    await this.options.store.applyEvent(row.provider, `checkout:${row.id}`, 'checkout.started', {
      shop: row.shop,
      plan: row.plan,
      status: 'pending',
      provider: row.provider,
      externalId,
      at: BEFORE_ANY_PROVIDER_EVENT,
      checkoutSessionId: row.id,
    }, nowIso());
  }

  private present(row: CheckoutSessionRow): CheckoutSession {
    const expired = (row.status === 'open' || row.status === 'awaiting_owner') && row.expires_at <= nowIso();
    return {
      sessionId: row.id,
      plan: row.plan as PlanId,
      shop: row.shop,
      status: expired ? 'expired' : row.status,
      provider: row.provider,
      amount: row.amount_cents / 100,
      currency: row.currency,
      checkoutUrl: row.external_url ?? `${this.options.baseUrl}/checkout/${row.id}`,
      createdAt: row.created_at,
      expiresAt: row.expires_at,
      completedAt: row.completed_at,
    };
  }
}

/**
 * What sending `alerts` more would cost this period, and how many of them would wait (the
 * dashboard's "next restock"): from the usage already read, with the rule `reserveNotifications` applies.
 */
export function costOfNextAlerts(usage: PlanUsage, alerts: number): { alerts: number; beyondAllowance: number; amount: number; held: number; currency: 'USD' } {
  const priceCents = Math.round(usage.overage.pricePerAlert * 100);
  const room = usage.monthlyAlertQuota + overageRoom({ overageCentsPerAlert: priceCents, overageCeilingCents: Math.round(usage.overage.ceiling * 100) });
  const allowanceLeft = Math.max(0, usage.monthlyAlertQuota - usage.used);
  const sent = Math.min(alerts, Math.max(0, room - usage.used));
  const beyondAllowance = Math.max(0, sent - allowanceLeft);
  return { alerts, beyondAllowance, amount: (beyondAllowance * priceCents) / 100, held: alerts - sent, currency: 'USD' };
}

/** Alerts the period may send beyond the allowance: as many whole alerts as the ceiling pays for. */
function overageRoom(entitlement: Pick<Entitlement, 'overageCentsPerAlert' | 'overageCeilingCents'>): number {
  return entitlement.overageCentsPerAlert > 0 ? Math.floor(entitlement.overageCeilingCents / entitlement.overageCentsPerAlert) : 0;
}

/** A proposal paid per request: the payment is the purchase, given back unless the owner accepts. */
function isPaid(row: CheckoutSessionRow): boolean {
  return row.provider === 'x402' || row.provider === 'mpp';
}

/** A one-time owner key: only its hash is stored. */
function ownerKey(): string {
  return randomBytes(32).toString('base64url');
}

function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('base64url');
}

/** The provider's period, rolled forward whole periods when its renewal news is late. */
function billingPeriod(start: string | null, end: string | null, now: Date): { periodStart: string; periodEnd: string } {
  if (!start || !end || Date.parse(end) <= Date.parse(start)) return calendarMonth(now);
  let from = Date.parse(start);
  let to = Date.parse(end);
  const length = to - from;
  if (now.getTime() < from) return calendarMonth(now);
  while (now.getTime() >= to) {
    from = to;
    to += length;
  }
  return { periodStart: new Date(from).toISOString(), periodEnd: new Date(to).toISOString() };
}

function calendarMonth(now: Date): { periodStart: string; periodEnd: string } {
  const start = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
  const end = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
  return { periodStart: new Date(start).toISOString(), periodEnd: new Date(end).toISOString() };
}
