import type { StoreEvent, StoreEventType } from '../core/events.ts';

/**
 * The Klaviyo metric each store event becomes: the name a merchant picks as a flow's trigger in
 * Klaviyo ("Metric" triggers, https://help.klaviyo.com/hc/en-us/articles/115002774932). Each is
 * prefixed so it never merges with Klaviyo's own back-in-stock metrics.
 */
export const KLAVIYO_METRICS: Partial<Record<StoreEventType, string>> = {
  'subscription.created': 'Restock Subscribed',
  'alert.sent': 'Restock Alert Sent',
  'alert.clicked': 'Restock Alert Clicked',
  'order.attributed': 'Restock Order Attributed',
};

interface Money {
  minor: number;
  currency: string;
}

/**
 * The JSON:API body of POST /api/events for one store event on the profile `email`
 * (https://developers.klaviyo.com/en/reference/create_event, revision 2026-10-15): `data.type`
 * `event`; `attributes.properties` (required), `time`, `value` (an order's worth, in the store's
 * currency), `unique_id` (our event id, so Klaviyo keeps an event sent twice once), `metric` by
 * name and `profile` by e-mail. No consent goes with it: an event says what happened, and only
 * Klaviyo's subscription endpoints change consent, which Restock never calls (docs/klaviyo.md).
 */
export function klaviyoEventBody(event: StoreEvent, email: string, shop: string): string | undefined {
  const metric = KLAVIYO_METRICS[event.type];
  if (metric === undefined) return undefined;
  const { email: _address, ...data } = event.data;
  const properties: Record<string, unknown> = { shop, ...data };
  const attributes: Record<string, unknown> = {
    properties,
    time: event.occurredAt,
    unique_id: event.id,
    metric: { data: { type: 'metric', attributes: { name: metric } } },
    profile: { data: { type: 'profile', attributes: { email } } },
  };
  if (event.type === 'subscription.created') {
    // A back-in-stock sign-up asks for one message about one product: consent to that alert,
    // not to marketing. Said as a fact on the event, for the merchant's flows to read.
    properties.marketingConsent = false;
    properties.consentScope = 'back-in-stock alert for this product';
  }
  if (event.type === 'order.attributed') {
    const lines = (event.data.lines ?? []) as Array<{ shopAmount?: Money }>;
    const amounts = lines.flatMap((line) => (line.shopAmount ? [line.shopAmount] : []));
    const currency = amounts[0]?.currency;
    if (currency !== undefined && amounts.every((amount) => amount.currency === currency)) {
      attributes.value = amounts.reduce((sum, amount) => sum + amount.minor, 0) / 10 ** minorDigits(currency);
      properties.currency = currency;
    }
  }
  return JSON.stringify({ data: { type: 'event', attributes } });
}

/** The alerts an event is about, whose profile it goes on (a click's alert; an order's lines' alerts). */
export function alertsOf(event: StoreEvent): string[] {
  if (event.type === 'alert.clicked') return typeof event.data.alertId === 'string' ? [event.data.alertId] : [];
  if (event.type === 'order.attributed') {
    const lines = (event.data.lines ?? []) as Array<{ alertId?: unknown }>;
    return [...new Set(lines.flatMap((line) => (typeof line.alertId === 'string' ? [line.alertId] : [])))];
  }
  return [];
}

function minorDigits(currency: string): number {
  try {
    return new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2;
  } catch {
    return 2;
  }
}
