import { z } from 'zod';
import { defineOperation } from '../core/operations.ts';
import { NotFound } from '../core/problems.ts';
import { storeInput } from '../stores/schemas.ts';
import type { NotificationRow, SuppressionRow } from './repository.ts';
import {
  alertQueueSchema,
  notificationsQuery,
  notificationsResponse,
  outboxResponse,
  suppressBody,
  suppressionParams,
  suppressionSchema,
  suppressionsResponse,
} from './schemas.ts';
import type { DispatchService } from './service.ts';

const EXAMPLE_SHOP = 'my-store.myshopify.com';

/** Reading the alert queue and ledger, managing suppressions, and the local outbox. */
export const dispatchOperations = [
  defineOperation({
    id: 'getAlertQueue',
    method: 'GET',
    path: '/api/v1/stores/:shop/queue',
    summary: 'Read alert queue lengths: waiting subscribers, alerts by status, restocks in progress',
    tag: 'dispatch',
    scope: 'api:read',
    input: storeInput,
    output: alertQueueSchema,
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP },
    tool: { title: "Read a store's alert queue lengths", description: 'Subscribers waiting per variant, alerts per status, restocks in progress.' },
    skill: true,
    run: (dispatch: DispatchService, { shop }, { caller }) => dispatch.readAlertQueue(caller, shop),
  }),
  defineOperation({
    id: 'listNotifications',
    method: 'GET',
    path: '/api/v1/stores/:shop/notifications',
    summary: 'Read the alert ledger: every alert, why it was sent and what happened',
    tag: 'dispatch',
    scope: 'api:read',
    input: storeInput.extend(notificationsQuery.shape).strict(),
    output: notificationsResponse,
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP, restockId: 'rst_0123456789' },
    run: async (dispatch: DispatchService, { shop, ...filter }, { caller }) => ({ items: (await dispatch.listNotifications(caller, shop, filter)).map(presentNotification) }),
  }),
  defineOperation({
    id: 'listSuppressions',
    method: 'GET',
    path: '/api/v1/stores/:shop/suppressions',
    summary: 'Read the addresses this store no longer mails (bounces, complaints, manual)',
    tag: 'dispatch',
    scope: 'api:read',
    input: storeInput,
    output: suppressionsResponse,
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP },
    run: async (dispatch: DispatchService, { shop }, { caller }) => ({ items: (await dispatch.suppressionsOf(caller, shop)).map(presentSuppression) }),
  }),
  defineOperation({
    id: 'suppressAddress',
    method: 'POST',
    path: '/api/v1/stores/:shop/suppressions',
    summary: 'Stop mailing an address for this store (report a complaint or hard bounce)',
    tag: 'dispatch',
    scope: 'inventory:alerts',
    idempotent: true,
    input: storeInput.extend(suppressBody.shape).strict(),
    output: suppressionSchema,
    errors: [400, 404, 413, 415, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP, email: 'shopper@example.com', reason: 'manual' },
    run: async (dispatch: DispatchService, { shop, email, reason, detail }, { caller }) => presentSuppression(await dispatch.suppressAddress(caller, shop, email, reason, detail ?? null)),
  }),
  defineOperation({
    id: 'unsuppressAddress',
    method: 'DELETE',
    path: '/api/v1/stores/:shop/suppressions/:email',
    summary: 'Mail an address again (after a suppression made in error)',
    tag: 'dispatch',
    scope: 'inventory:alerts',
    input: storeInput.extend({ email: suppressionParams.shape.email }),
    output: z.null().describe('Removed'),
    status: 204,
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP, email: 'shopper@example.com' },
    run: async (dispatch: DispatchService, { shop, email }, { caller }) => {
      if (!(await dispatch.unsuppressAddress(caller, shop, email))) throw new NotFound(`${email} is not suppressed for ${shop.toLowerCase()}.`);
      return null;
    },
  }),
  defineOperation({
    id: 'listOutbox',
    method: 'GET',
    path: '/api/v1/stores/:shop/outbox',
    summary: "Read the store's mail kept in the local outbox (embedded mode)",
    tag: 'dispatch',
    scope: 'api:read',
    input: storeInput.extend({ limit: z.coerce.number().int().min(1).max(500).default(50) }).strict(),
    output: outboxResponse,
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP },
    run: async (dispatch: DispatchService, { shop, limit }, { caller }) => {
      const items = await dispatch.listOutbox(caller, shop, limit);
      return { items: items.map(({ storeDomain: _store, from: _from, ...mail }) => mail) };
    },
  }),
];

function presentNotification(row: NotificationRow) {
  return {
    notificationId: row.id,
    restockId: row.restock_id,
    subscriptionId: row.subscription_id,
    email: row.email,
    productId: row.product_id,
    variantId: row.variant_id,
    batch: row.batch,
    status: row.status as 'sent',
    reason: row.reason,
    outcome: row.outcome,
    attempts: row.attempts,
    createdAt: row.created_at,
    sentAt: row.sent_at,
  };
}

function presentSuppression(row: SuppressionRow) {
  return { email: row.email, reason: row.reason as 'bounce', detail: row.detail, createdAt: row.created_at };
}
