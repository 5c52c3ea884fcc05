import { z } from 'zod';
import type { CancellationReport, Money, OrderLineReport, OrderReport, RefundLineReport, RefundReport } from '../conversions/service.ts';
import { toMinorUnits } from '../conversions/service.ts';

/**
 * The order webhooks as Shopify sends them (REST shape), trimmed by the subscriptions'
 * `include_fields` in shopify.app.toml to what attribution reads. Only those fields are parsed;
 * anything else Shopify adds is ignored. Field names follow the webhooks reference
 * (https://shopify.dev/docs/api/webhooks/latest, topics orders/create, orders/cancelled,
 * refunds/create) and the REST Order and Refund resources.
 */

/**
 * A Shopify id in JSON: a number, which JSON.parse reads exactly only up to 2^53 (today's ids are
 * far below). One past that is refused rather than read as a neighbour's id.
 */
const shopifyId = z.union([
  z.number().int().nonnegative().refine(Number.isSafeInteger, 'too large to read exactly from JSON'),
  z.string().regex(/^[0-9]{1,20}$/),
]);

/** Shopify's money: a decimal string and an ISO 4217 code. */
const money = z.object({ amount: z.string(), currency_code: z.string() });
/** A `*_set` field: the amount in the shop's currency and in the one the buyer saw. */
const moneySet = z.object({ shop_money: money, presentment_money: money });

const timestamp = z.string().refine((value) => !Number.isNaN(Date.parse(value)), 'not a date and time');

export const orderCreatePayload = z.object({
  id: shopifyId,
  email: z.string().nullish(),
  contact_email: z.string().nullish(),
  created_at: timestamp,
  currency: z.string(),
  presentment_currency: z.string(),
  line_items: z.array(
    z.object({
      id: shopifyId,
      // Null for a custom item or a product deleted since: nothing a shopper waits for.
      product_id: shopifyId.nullish(),
      variant_id: shopifyId.nullish(),
      quantity: z.number().int().positive(),
      price_set: moneySet,
      discount_allocations: z.array(z.object({ amount_set: moneySet })).default([]),
    }),
  ),
});

export const orderCancelledPayload = z.object({
  id: shopifyId,
  cancelled_at: timestamp,
});

export const refundCreatePayload = z.object({
  id: shopifyId,
  order_id: shopifyId,
  created_at: timestamp,
  refund_line_items: z
    .array(
      z.object({
        line_item_id: shopifyId,
        quantity: z.number().int().nonnegative(),
        subtotal_set: moneySet,
      }),
    )
    .default([]),
});

export type OrderCreatePayload = z.infer<typeof orderCreatePayload>;
export type OrderCancelledPayload = z.infer<typeof orderCancelledPayload>;
export type RefundCreatePayload = z.infer<typeof refundCreatePayload>;

/** A payload whose numbers do not add up (a currency that is not the order's, discounts above the price). */
export class OrderPayloadError extends Error {
  override name = 'OrderPayloadError';
}

export const productGid = (id: number | string) => `gid://shopify/Product/${id}`;
export const variantGid = (id: number | string) => `gid://shopify/ProductVariant/${id}`;

/**
 * orders/create → the order. Ids are kept as the stores keep them: the order and its lines by
 * Shopify's numeric id (refunds name them so), products and variants as the Admin API's global
 * ids, the form subscriptions and inventory hold. A line's amount is its price times its quantity
 * less the discounts allocated to it, in the buyer's currency and in the shop's. Lines without a
 * product are left out; an order without an address (point of sale, some draft orders) has none.
 */
export function orderReport(shop: string, order: OrderCreatePayload): OrderReport {
  const currencies = { presentment: order.presentment_currency, shop: order.currency };
  return {
    storeDomain: shop,
    orderId: String(order.id),
    email: buyerEmail(order),
    placedAt: isoTimestamp(order.created_at),
    lines: order.line_items.flatMap((line) => (line.product_id == null ? [] : [orderLine(line, line.product_id, currencies)])),
    source: 'shopify',
  };
}

/** orders/cancelled → the cancellation of the order, by the same id orders/create named. */
export function cancellationReport(shop: string, order: OrderCancelledPayload): CancellationReport {
  return { storeDomain: shop, orderId: String(order.id), cancelledAt: isoTimestamp(order.cancelled_at) };
}

/**
 * refunds/create → what was taken back, per order line: the quantity and the line's refunded
 * subtotal (after its discounts, before tax), in both currencies. A refund of shipping alone
 * has no lines.
 */
export function refundReport(shop: string, refund: RefundCreatePayload): RefundReport {
  return {
    storeDomain: shop,
    orderId: String(refund.order_id),
    refundId: String(refund.id),
    refundedAt: isoTimestamp(refund.created_at),
    lines: refund.refund_line_items.map((line): RefundLineReport => ({
      lineId: String(line.line_item_id),
      quantity: line.quantity,
      amount: toMoney(line.subtotal_set.presentment_money),
      shopAmount: toMoney(line.subtotal_set.shop_money),
    })),
  };
}

type OrderLine = OrderCreatePayload['line_items'][number];

function orderLine(line: OrderLine, productId: number | string, currencies: { presentment: string; shop: string }): OrderLineReport {
  const discounts = line.discount_allocations.map((allocation) => allocation.amount_set);
  return {
    lineId: String(line.id),
    productId: productGid(productId),
    variantId: line.variant_id == null ? null : variantGid(line.variant_id),
    quantity: line.quantity,
    amount: lineAmount(line, 'presentment_money', currencies.presentment, discounts),
    shopAmount: lineAmount(line, 'shop_money', currencies.shop, discounts),
  };
}

function lineAmount(line: OrderLine, side: 'presentment_money' | 'shop_money', currency: string, discounts: Array<z.infer<typeof moneySet>>): Money {
  const price = inCurrency(line.price_set[side], currency);
  const discounted = discounts.reduce((sum, discount) => sum + inCurrency(discount[side], currency), 0);
  const minor = price * line.quantity - discounted;
  if (!Number.isSafeInteger(minor) || minor < 0) {
    throw new OrderPayloadError(`Line ${line.id}: discounts of ${discounted} exceed ${line.quantity} × ${price} (${currency} minor units)`);
  }
  return { minor, currency };
}

function inCurrency(amount: z.infer<typeof money>, currency: string): number {
  if (amount.currency_code !== currency) throw new OrderPayloadError(`An amount in ${amount.currency_code} where the order's currency is ${currency}`);
  return toMoney(amount).minor;
}

function toMoney(amount: z.infer<typeof money>): Money {
  return { minor: toMinorUnits(amount.amount, amount.currency_code), currency: amount.currency_code };
}

/** `email` is the order's; `contact_email` is the same address on older payloads and some channels. */
function buyerEmail(order: OrderCreatePayload): string | null {
  return order.email?.trim() || order.contact_email?.trim() || null;
}

/** Shopify stamps in the shop's offset (-05:00); the stores keep UTC, so comparisons as text hold. */
function isoTimestamp(value: string): string {
  return new Date(value).toISOString();
}
