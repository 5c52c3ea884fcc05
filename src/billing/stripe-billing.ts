import type Stripe from 'stripe';
import type { PlanEvent, PlanStatus } from './plan-state.ts';
import type { Plan } from './plans.ts';
import type { CheckoutSessionRow } from './repository.ts';
import type { UsageReport } from './service.ts';

/** The Billing Meter alerts beyond the allowance are counted on, one per Stripe account. */
const OVERAGE_METER_EVENT = 'restock_alerts_beyond_allowance';
const OVERAGE_NAME = 'Restock alerts beyond the allowance';

/**
 * Plans sold through Stripe Checkout in subscription mode, and Stripe's webhook events turned
 * into plan events. The SDK does the HTTP and the signature check; this file only maps.
 */
export class StripeBilling {
  /** The metered price per lookup key, once found or made: one per plan price, so a handful. */
  private readonly overagePrices = new Map<string, Promise<string>>();

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
    const monthly: Stripe.Checkout.SessionCreateParams.LineItem = {
      quantity: 1,
      price_data: {
        currency: plan.currency.toLowerCase(),
        unit_amount: plan.amountCents,
        recurring: { interval: 'month' },
        product_data: { name: `Restock ${plan.name}` },
      },
    };
    // A metered line takes no quantity: Stripe bills what the meter counted in the period, in arrears.
    const overage = plan.overageCentsPerAlert > 0 ? [{ price: await this.overagePriceId(plan) }] : [];
    const created = await this.client.checkout.sessions.create(
      {
        mode: 'subscription',
        line_items: [monthly, ...overage],
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

  /**
   * Tells Stripe of alerts beyond the allowance as a meter event on the subscription's customer,
   * billed with the plan's next invoice at the metered price. The report's idempotency key is the
   * meter event's `identifier`, which Stripe keeps once.
   */
  async reportUsage(subscriptionId: string, usage: UsageReport): Promise<void> {
    const subscription = await this.client.subscriptions.retrieve(subscriptionId);
    const customer = typeof subscription.customer === 'string' ? subscription.customer : subscription.customer.id;
    await this.client.billing.meterEvents.create(
      { event_name: OVERAGE_METER_EVENT, identifier: usage.idempotencyKey, payload: { stripe_customer_id: customer, value: String(usage.alerts) } },
      { idempotencyKey: usage.idempotencyKey },
    );
  }

  /** The metered price of the plan's overage, found by its lookup key or made once (with its meter). */
  private overagePriceId(plan: Plan): Promise<string> {
    const lookupKey = `restock_overage_${plan.overageCentsPerAlert}_${plan.currency.toLowerCase()}`;
    let price = this.overagePrices.get(lookupKey);
    if (!price) {
      price = this.findOrMakeOveragePrice(lookupKey, plan);
      // A failure is not remembered: the next checkout asks Stripe again.
      price.catch(() => this.overagePrices.delete(lookupKey));
      this.overagePrices.set(lookupKey, price);
    }
    return price;
  }

  private async findOrMakeOveragePrice(lookupKey: string, plan: Plan): Promise<string> {
    const found = await this.client.prices.list({ lookup_keys: [lookupKey], active: true, limit: 1 });
    if (found.data[0]) return found.data[0].id;
    const meter = await this.overageMeter();
    const created = await this.client.prices.create(
      {
        currency: plan.currency.toLowerCase(),
        unit_amount: plan.overageCentsPerAlert,
        recurring: { interval: 'month', usage_type: 'metered', meter },
        product_data: { name: OVERAGE_NAME },
        lookup_key: lookupKey,
      },
      { idempotencyKey: `restock-overage-price-${lookupKey}` },
    );
    return created.id;
  }

  private async overageMeter(): Promise<string> {
    for await (const meter of this.client.billing.meters.list({ status: 'active', limit: 100 })) {
      if (meter.event_name === OVERAGE_METER_EVENT) return meter.id;
    }
    const created = await this.client.billing.meters.create(
      {
        display_name: OVERAGE_NAME,
        event_name: OVERAGE_METER_EVENT,
        default_aggregation: { formula: 'sum' },
        customer_mapping: { type: 'by_id', event_payload_key: 'stripe_customer_id' },
        value_settings: { event_payload_key: 'value' },
      },
      { idempotencyKey: 'restock-overage-meter' },
    );
    return created.id;
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
