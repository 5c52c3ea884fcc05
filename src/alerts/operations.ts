import { z } from 'zod';
import type { SubscriptionCallbacks } from '../core/events.ts';
import { defineOperation, perRequestCharges } from '../core/operations.ts';
import { NotConfigured } from '../core/problems.ts';
import { subscribeAlertBody, subscribeAlertResponse, subscriptionIdSchema, subscriptionSchema } from './schemas.ts';
import type { SubscriptionService } from './service.ts';

const EXAMPLE_SUBSCRIPTION = 'sub_0123456789abcdefghijklmnop';

function callbacksOf(alerts: SubscriptionService): SubscriptionCallbacks {
  if (!alerts.callbacks) throw new NotConfigured('Callbacks are not served by this process.');
  return alerts.callbacks;
}
const subscriptionInput = z.object({ subscriptionId: subscriptionIdSchema });

/** subscribeAlert and its reads: the seed's alert subscription API under /api/v1/alerts. */
export const alertOperations = [
  defineOperation({
    id: 'subscribeAlert',
    method: 'POST',
    path: '/api/v1/alerts/subscribe',
    summary: 'Subscribe a customer e-mail to a restock alert',
    description:
      'Creates a subscription that sends one e-mail when the product (or the given variant) is back in stock. ' +
      'Subscribing the same product, variant and e-mail again returns the existing active subscription. ' +
      'With `callbackUrl`, the subscription\'s news (back in stock, alert sent, clicked, order credited) is posted there, signed. ' +
      'Without an access token, the request is paid per request (x402 or MPP, USD 0.05).',
    tag: 'alerts',
    scope: 'api:write',
    idempotent: true,
    input: subscribeAlertBody,
    output: subscribeAlertResponse,
    errors: [400, 403, 409, 413, 415, 422, 501, 503],
    tenancy: { refusal: 403 },
    example: { productId: 'gid://shopify/Product/123', variantId: 'gid://shopify/ProductVariant/456', email: 'shopper@example.com', shop: 'my-store.myshopify.com' },
    tool: {
      title: 'Subscribe a customer to a restock alert',
      description: 'One e-mail when the product (or variant) is back in stock. The same product, variant and e-mail again returns the same subscription.',
    },
    skill: true,
    paid: {
      price: { usdCents: 5, description: 'Restock alert subscription (per-alert processing fee)', mpp: perRequestCharges, x402: true },
      storeOf: (input) => input.shop,
      resultReference: (result) => result.subscriptionId,
    },
    run: async (alerts: SubscriptionService, input, { caller }) => {
      // Checked before the subscription is stored: a refused callback leaves nothing behind.
      const callbackUrl = input.callbackUrl === undefined ? undefined : callbacksOf(alerts).checkUrl(input.callbackUrl, '/body/callbackUrl');
      const { subscriptionId, status } = await alerts.subscribeAlert(input, caller);
      if (callbackUrl === undefined) return { subscriptionId, status };
      const { callbackSecret } = await callbacksOf(alerts).attachCallback(caller.agentId, subscriptionId, callbackUrl);
      return { subscriptionId, status, ...(callbackSecret === undefined ? {} : { callbackSecret }) };
    },
  }),
  defineOperation({
    id: 'getSubscription',
    method: 'GET',
    path: '/api/v1/alerts/:subscriptionId',
    summary: 'Read an alert subscription',
    tag: 'alerts',
    scope: 'api:read',
    input: subscriptionInput,
    output: subscriptionSchema,
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { subscriptionId: EXAMPLE_SUBSCRIPTION },
    tool: { title: 'Read an alert subscription', description: 'Status, product, variant, store and the one-click unsubscribe link.' },
    skill: true,
    run: (alerts: SubscriptionService, { subscriptionId }, { caller }) => alerts.getSubscription(subscriptionId, caller),
  }),
  defineOperation({
    id: 'cancelSubscription',
    method: 'DELETE',
    path: '/api/v1/alerts/:subscriptionId',
    summary: 'Cancel an alert subscription',
    description: 'Stops a waiting alert. Cancelling a cancelled subscription returns it unchanged; one already notified or unsubscribed answers 409.',
    tag: 'alerts',
    scope: 'api:write',
    idempotent: true,
    input: subscriptionInput,
    output: subscriptionSchema,
    errors: [400, 404, 409, 503],
    tenancy: { refusal: 404 },
    example: { subscriptionId: EXAMPLE_SUBSCRIPTION },
    tool: { title: 'Cancel an alert subscription', description: 'Stops a waiting alert; cancelling twice is harmless.' },
    skill: true,
    run: (alerts: SubscriptionService, { subscriptionId }, { caller }) => alerts.cancelSubscription(subscriptionId, caller),
  }),
];
