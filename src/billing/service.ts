import { isoAfter, nowIso } from '../core/clock.ts';
import { newId } from '../core/ids.ts';
import { canSee, storeForWrite, type Caller } from '../core/http/caller.ts';
import { Forbidden, NotFound, Problem } from '../core/problems.ts';
import { plans, type PlanId } from './plans.ts';
import type { CheckoutSession } from './schemas.ts';
import type { BillingStore, CheckoutSessionRow } from './store.ts';

/**
 * checkoutPlan and what follows it. The embedded default sells through a hosted page of ours in
 * test mode; the card processors plug in here as further providers.
 */
export class BillingService {
  constructor(
    private readonly store: BillingStore,
    private readonly baseUrl: string,
    private readonly sessionTtlMinutes: number,
  ) {}

  listPlans() {
    return Object.entries(plans).map(([plan, p]) => ({
      plan: plan as PlanId,
      name: p.name,
      description: p.description,
      amount: p.amountCents / 100,
      currency: p.currency,
      interval: p.interval,
      monthlyAlertQuota: p.monthlyAlertQuota,
    }));
  }

  /**
   * checkoutPlan: a new checkout session for the plan and store. When the request itself paid
   * for the plan (pay per request), the session is complete at once and the plan active.
   */
  async checkoutPlan(input: { plan: PlanId; shop: string }, caller: Caller, paidWith?: 'x402' | 'mpp'): Promise<CheckoutSession> {
    if (storeForWrite(caller, input.shop).foreign) {
      throw new Forbidden(`This agent is bound to ${caller.storeDomain} and cannot buy a plan for ${input.shop}.`);
    }
    const now = new Date();
    const plan = plans[input.plan];
    const row: CheckoutSessionRow = {
      id: newId('cs'),
      plan: input.plan,
      shop: input.shop.toLowerCase(),
      status: 'open',
      provider: paidWith ?? 'local',
      amount_cents: plan.amountCents,
      currency: plan.currency,
      created_at: now.toISOString(),
      expires_at: isoAfter(this.sessionTtlMinutes * 60_000, now),
      completed_at: null,
      agent_id: caller.agentId,
    };
    await this.store.createSession(row);
    if (paidWith) return this.present((await this.store.completeSession(row.id, nowIso())) ?? row);
    return this.present(row);
  }

  /** Without a caller: the hosted page, which anyone holding the session's URL may open. */
  async getCheckoutSession(id: string, caller?: Caller): Promise<CheckoutSession> {
    const row = await this.store.findSession(id);
    if (!row || (caller && !canSee(caller, { agentId: row.agent_id, storeDomain: row.shop }))) {
      throw new NotFound(`No checkout session ${id}.`);
    }
    return this.present(row);
  }

  /** Completes a test-mode purchase on our hosted page; the store's plan becomes active. */
  async completeTestCheckout(id: string): Promise<CheckoutSession> {
    const row = await this.store.completeSession(id, nowIso());
    if (!row) throw new NotFound(`No checkout session ${id}.`);
    const session = this.present(row);
    if (session.status === 'expired') {
      throw new Problem('checkout-expired', `Checkout session ${id} expired at ${row.expires_at}.`);
    }
    return session;
  }

  private present(row: CheckoutSessionRow): CheckoutSession {
    const expired = row.status === 'open' && row.expires_at <= nowIso();
    return {
      sessionId: row.id,
      plan: row.plan as PlanId,
      shop: row.shop,
      status: expired ? 'expired' : (row.status as CheckoutSession['status']),
      amount: row.amount_cents / 100,
      currency: row.currency,
      checkoutUrl: `${this.baseUrl}/checkout/${row.id}`,
      createdAt: row.created_at,
      expiresAt: row.expires_at,
      completedAt: row.completed_at,
    };
  }
}
