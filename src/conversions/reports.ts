/**
 * What a platform tells us about a store's orders, in the one shape attribution reads: the
 * Shopify webhooks and `POST /api/v1/stores/{domain}/orders` are both turned into these.
 * Only what attribution needs is kept: which variants, how many, for how much, bought by which
 * address and when. No names, addresses or payment details.
 */

/** An amount in integers of a currency's minor unit (cents; yen have none), never a float. */
export interface Money {
  /** Integer, >= 0. */
  minor: number;
  /** ISO 4217, upper case. */
  currency: string;
}

export interface OrderLineReport {
  /** The platform's id of the line, unique within the order (refunds name it). */
  lineId: string;
  productId: string;
  variantId: string | null;
  quantity: number;
  /** What the shopper paid for the line, after its discounts, in the order's presentment currency. */
  amount: Money;
  /** The same in the store's own currency. */
  shopAmount: Money;
}

export interface OrderReport {
  storeDomain: string;
  /** The platform's order id, unique per store. */
  orderId: string;
  /** The buyer's address as the platform gives it; null when the order has none (attributed to nobody). */
  email: string | null;
  /** When the order was placed (ISO 8601). */
  placedAt: string;
  lines: OrderLineReport[];
  /** The platform that told of it (`shopify`, `vendure`), or `api` for the orders API. */
  source: string;
}

export interface RefundLineReport {
  lineId: string;
  quantity: number;
  amount: Money;
  shopAmount: Money;
}

export interface RefundReport {
  storeDomain: string;
  orderId: string;
  /** The platform's refund id: a refund delivered twice is taken back once. */
  refundId: string;
  refundedAt: string;
  lines: RefundLineReport[];
}

export interface CancellationReport {
  storeDomain: string;
  orderId: string;
  cancelledAt: string;
}

/** Where order news goes (the conversions service); the Shopify webhook worker and the orders API call it. */
export interface OrderSink {
  recordOrder(report: OrderReport): Promise<void>;
  recordRefund(report: RefundReport): Promise<void>;
  recordCancellation(report: CancellationReport): Promise<void>;
  /** Shopify's customers/redact and the like: the address's orders and clicks go. */
  eraseCustomer(storeDomain: string, email: string): Promise<number>;
  /** shop/redact: every order and click of the store goes. */
  eraseStore(storeDomain: string): Promise<void>;
}
