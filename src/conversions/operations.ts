import { defineOperation } from '../core/operations.ts';
import { storeInput } from '../stores/schemas.ts';
import { orderAcceptedResponse, orderIdSchema, performanceQuery, performanceResponse, reportCancellationBody, reportOrderBody, reportRefundBody } from './schemas.ts';
import type { ConversionService } from './service.ts';

const EXAMPLE_SHOP = 'shop.example.com';
const orderInput = storeInput.extend({ orderId: orderIdSchema });

/** Orders, refunds and cancellations reported by platforms other than Shopify, and what alerts won back. */
export const conversionOperations = [
  defineOperation({
    id: 'reportOrder',
    method: 'POST',
    path: '/api/v1/stores/:shop/orders',
    summary: 'Report an order (platforms other than Shopify); lines bought by an alerted shopper are credited to the alert',
    tag: 'conversions',
    scope: 'inventory:alerts',
    idempotent: true,
    input: storeInput.extend(reportOrderBody.shape).strict(),
    output: orderAcceptedResponse,
    errors: [400, 404, 413, 415, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP, orderId: '1', email: 'buyer@example.com', placedAt: '2026-11-29T10:00:00Z', currency: 'EUR', lines: [{ lineId: '1', productId: 'gid://woocommerce/Product/7', quantity: 1, amountMinor: 100 }] },
    run: async (conversions: ConversionService, { shop, ...order }, { caller }) => {
      const shopCurrency = order.shopCurrency ?? order.currency;
      await conversions.reportOrder(caller, shop, {
        orderId: order.orderId,
        email: order.email,
        placedAt: order.placedAt,
        lines: order.lines.map((line) => ({
          lineId: line.lineId,
          productId: line.productId,
          variantId: line.variantId ?? null,
          quantity: line.quantity,
          amount: { minor: line.amountMinor, currency: order.currency },
          shopAmount: { minor: line.shopAmountMinor ?? line.amountMinor, currency: shopCurrency },
        })),
      });
      return { accepted: true as const };
    },
  }),
  defineOperation({
    id: 'reportRefund',
    method: 'POST',
    path: '/api/v1/stores/:shop/orders/:orderId/refunds',
    summary: 'Report a refund of an order reported before; it takes back the revenue credited to alerts',
    tag: 'conversions',
    scope: 'inventory:alerts',
    idempotent: true,
    input: orderInput.extend(reportRefundBody.shape).strict(),
    output: orderAcceptedResponse,
    errors: [400, 404, 413, 415, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP, orderId: '1', refundId: '1', refundedAt: '2026-11-29T10:00:00Z', currency: 'EUR', lines: [{ lineId: '1', quantity: 1, amountMinor: 100 }] },
    run: async (conversions: ConversionService, { shop, orderId, ...refund }, { caller }) => {
      await conversions.reportRefund(caller, shop, {
        orderId,
        refundId: refund.refundId,
        refundedAt: refund.refundedAt,
        lines: refund.lines.map((line) => ({
          lineId: line.lineId,
          quantity: line.quantity,
          amount: { minor: line.amountMinor, currency: refund.currency },
          shopAmount: { minor: line.shopAmountMinor ?? line.amountMinor, currency: refund.shopCurrency ?? refund.currency },
        })),
      });
      return { accepted: true as const };
    },
  }),
  defineOperation({
    id: 'reportCancellation',
    method: 'POST',
    path: '/api/v1/stores/:shop/orders/:orderId/cancellation',
    summary: 'Report that an order was cancelled; its credited revenue becomes 0',
    tag: 'conversions',
    scope: 'inventory:alerts',
    idempotent: true,
    input: orderInput.extend(reportCancellationBody.shape).strict(),
    output: orderAcceptedResponse,
    errors: [400, 404, 415, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP, orderId: '1', cancelledAt: '2026-11-29T10:00:00Z' },
    run: async (conversions: ConversionService, { shop, orderId, cancelledAt }, { caller }) => {
      await conversions.reportCancellation(caller, shop, { orderId, cancelledAt });
      return { accepted: true as const };
    },
  }),
  defineOperation({
    id: 'getPerformance',
    method: 'GET',
    path: '/api/v1/stores/:shop/performance',
    summary: 'What alerts did: sends, clicks, orders and revenue won back, overall, per day and per product',
    tag: 'conversions',
    scope: 'api:read',
    input: storeInput.extend(performanceQuery.shape).strict(),
    output: performanceResponse,
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP },
    tool: {
      title: 'Read what alerts won back',
      description: "Sends, clicks, orders credited to alerts (direct or assisted) and revenue won back, net of refunds, overall, per day and per product, over the last `days` days (default 30). The store's own agents only.",
    },
    run: (conversions: ConversionService, { shop, days }, { caller }) => conversions.performance(caller, shop, days),
  }),
];
