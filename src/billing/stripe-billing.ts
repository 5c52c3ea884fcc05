import type Stripe from 'stripe';
import type { PlanEvent, PlanStatus } from './plan-state.ts';
import type { Plan } from './plans.ts';
import type { CheckoutSessionRow } from './repository.ts';

/**
 * Plans sold through Stripe Checkout in subscription mode, and Stripe's webhook events turned
 * into plan events. The SDK does the HTTP and the signature check; this file only maps.
 */
export class StripeBilling {
  constructor(
    readonly client: Stripe,
    private readonly webhookSecret: string | undefined,
    private readonly baseUrl: string,
  ) {}

  get verifiesWebhooks(): boolean {
    return this.webhookSecret !== undefined;
  }

  /** A Checkout Session for the plan; our session id travels as `client_reference_id` and in the subscription's metadata. */
  async startCheckout(session: CheckoutSessionRow, plan: Plan): Promise<{ externalId: string; url: string }> {
    const metadata = { shop: session.shop, plan: session.plan, checkout_session: session.id };
    const created = await this.client.checkout.sessions.create(
      {
        mode: 'subscription',
        line_items: [
          {
            quantity: 1,
            price_data: {
              currency: plan.currency.toLowerCase(),
              unit_amount: plan.amountCents,
              recurring: { interval: 'month' },
              product_data: { name: `Restock ${plan.name}` },
            },
          },
        ],
        client_reference_id: session.id,
        metadata,
        subscription_data: { metadata },
        success_url: `${this.baseUrl}/checkout/${session.id}?result=success`,
        cancel_url: `${this.baseUrl}/checkout/${session.id}?result=cancelled`,
      },
      { idempotencyKey: `checkout_${session.id}` },
    );
    if (!created.url) throw new Error('Stripe returned a Checkout Session without a URL');
    return { externalId: created.id, url: created.url };
  }

  /** The event, if its `Stripe-Signature` is good and recent (the SDK's 5-minute tolerance); otherwise throws. */
  verify(payload: Buffer, signature: string): Stripe.Event {
    return this.client.webhooks.constructEvent(payload, signature, this.webhookSecret!);
  }

  /**
   * The plan event a Stripe event means, or a reason to record it unapplied. Subscriptions carry
   * the shop and plan in their metadata (set at checkout); an invoice names its subscription.
   */
  async planEvent(event: Stripe.Event): Promise<PlanEvent | string> {
    const at = new Date(event.created * 1000).toISOString();
    switch (event.type) {
      case 'checkout.session.completed': {
        const session = event.data.object;
        if (session.mode !== 'subscription' || typeof session.subscription !== 'string') return 'not a subscription checkout';
        const subscription = await this.client.subscriptions.retrieve(session.subscription);
        return fromSubscription(subscription, at, session.client_reference_id);
      }
      case 'customer.subscription.created':
      case 'customer.subscription.updated':
      case 'customer.subscription.deleted':
        return fromSubscription(event.data.object, at, null);
      case 'invoice.payment_failed': {
        // Newer API versions name the subscription under `parent`; older ones on the invoice.
        const invoice = event.data.object as Stripe.Invoice & { subscription?: string | { id: string } | null };
        const named = invoice.parent?.subscription_details?.subscription ?? invoice.subscription;
        const id = typeof named === 'string' ? named : named?.id;
        if (!id) return 'an invoice of no subscription';
        const subscription = await this.client.subscriptions.retrieve(id);
        const mapped = fromSubscription(subscription, at, null);
        // The subscription may still read active for a moment; the failed payment is the news.
        return typeof mapped === 'string' ? mapped : { ...mapped, status: mapped.status === 'cancelled' ? 'cancelled' : 'past_due' };
      }
      default:
        return `type ${event.type} is not about plans`;
    }
  }
}

function fromSubscription(subscription: Stripe.Subscription, at: string, checkoutSessionId: string | null): PlanEvent | string {
  const { shop, plan, checkout_session: fromMetadata } = subscription.metadata ?? {};
  if (!shop || !plan) return 'a subscription not made by a Restock checkout (no shop and plan in its metadata)';
  const item = subscription.items?.data?.[0] as (Stripe.SubscriptionItem & { current_period_start?: number; current_period_end?: number }) | undefined;
  const legacy = subscription as Stripe.Subscription & { current_period_start?: number; current_period_end?: number };
  const start = item?.current_period_start ?? legacy.current_period_start;
  const end = item?.current_period_end ?? legacy.current_period_end;
  return {
    shop,
    plan,
    status: planStatus(subscription.status),
    provider: 'stripe',
    externalId: subscription.id,
    at,
    periodStart: start ? new Date(start * 1000).toISOString() : null,
    periodEnd: end ? new Date(end * 1000).toISOString() : null,
    checkoutSessionId: checkoutSessionId ?? fromMetadata ?? null,
  };
}

/** Stripe's subscription statuses in our four. */
export function planStatus(status: Stripe.Subscription.Status): PlanStatus {
  switch (status) {
    case 'active':
    case 'trialing':
      return 'active';
    case 'past_due':
    case 'unpaid':
    case 'paused':
      return 'past_due';
    case 'incomplete':
      return 'pending';
    default:
      // canceled, incomplete_expired
      return 'cancelled';
  }
}
