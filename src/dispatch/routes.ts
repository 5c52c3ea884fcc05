import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AlertService } from '../alerts/service.ts';
import { ownStore } from '../core/http/caller.ts';
import { problemResponses } from '../core/http/openapi-responses.ts';
import type { MailOutboxStore } from '../core/mail/outbox-store.ts';
import { NotFound } from '../core/problems.ts';
import { shopSchema, storeParams } from '../stores/schemas.ts';
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
import type { NotificationRow, RestockRow, SuppressionRow } from './store.ts';

/** Reading the alert queue and ledger, managing suppressions, and the local outbox. */
export function dispatchRoutes(service: DispatchService, alerts: AlertService, outbox: MailOutboxStore) {
  return async function (app: FastifyInstance) {
    const api = app.withTypeProvider<ZodTypeProvider>();

    api.get('/api/v1/stores/:domain/queue', {
      config: { scope: 'api:read' },
      schema: {
        operationId: 'getAlertQueue',
        summary: 'Read alert queue lengths: waiting subscribers, alerts by status, restocks in progress',
        tags: ['dispatch'],
        params: storeParams,
        response: { 200: alertQueueSchema, ...problemResponses(400, 404, 503) },
      },
      handler: (request) => readAlertQueue(service, alerts, ownStore(request.caller!, request.params.domain)),
    });

    api.get('/api/v1/stores/:domain/notifications', {
      config: { scope: 'api:read' },
      schema: {
        operationId: 'listNotifications',
        summary: 'Read the alert ledger: every alert, why it was sent and what happened',
        tags: ['dispatch'],
        params: storeParams,
        querystring: notificationsQuery,
        response: { 200: notificationsResponse, ...problemResponses(400, 404, 503) },
      },
      handler: async (request) => {
        const domain = ownStore(request.caller!, request.params.domain);
        const rows = await service.listNotifications({ storeDomain: domain, ...request.query });
        return { items: rows.map(presentNotification) };
      },
    });

    api.get('/api/v1/stores/:domain/suppressions', {
      config: { scope: 'api:read' },
      schema: {
        operationId: 'listSuppressions',
        summary: 'Read the addresses this store no longer mails (bounces, complaints, manual)',
        tags: ['dispatch'],
        params: storeParams,
        response: { 200: suppressionsResponse, ...problemResponses(400, 404, 503) },
      },
      handler: async (request) => {
        const domain = ownStore(request.caller!, request.params.domain);
        return { items: (await service.listSuppressions(domain)).map(presentSuppression) };
      },
    });

    api.post('/api/v1/stores/:domain/suppressions', {
      config: { scope: 'inventory:alerts', idempotent: true },
      schema: {
        operationId: 'suppressAddress',
        summary: 'Stop mailing an address for this store (report a complaint or hard bounce)',
        tags: ['dispatch'],
        params: storeParams,
        body: suppressBody,
        response: { 200: suppressionSchema, ...problemResponses(400, 404, 413, 415, 503) },
      },
      handler: async (request) => {
        const domain = ownStore(request.caller!, request.params.domain);
        const { email, reason, detail } = request.body;
        return presentSuppression(await service.suppress(domain, email, reason, detail ?? null));
      },
    });

    api.delete('/api/v1/stores/:domain/suppressions/:email', {
      config: { scope: 'inventory:alerts' },
      schema: {
        operationId: 'unsuppressAddress',
        summary: 'Mail an address again (after a suppression made in error)',
        tags: ['dispatch'],
        params: suppressionParams.extend({ domain: shopSchema }),
        response: { 204: z.null().describe('Removed'), ...problemResponses(400, 404, 503) },
      },
      handler: async (request, reply) => {
        const domain = ownStore(request.caller!, request.params.domain);
        if (!(await service.unsuppress(domain, request.params.email))) throw new NotFound(`${request.params.email} is not suppressed for ${domain}.`);
        return reply.code(204).send(null);
      },
    });

    api.get('/api/v1/stores/:domain/outbox', {
      config: { scope: 'api:read' },
      schema: {
        operationId: 'listOutbox',
        summary: "Read the store's mail kept in the local outbox (embedded mode)",
        tags: ['dispatch'],
        params: storeParams,
        querystring: z.object({ limit: z.coerce.number().int().min(1).max(500).default(50) }).strict(),
        response: { 200: outboxResponse, ...problemResponses(400, 404, 503) },
      },
      handler: async (request) => {
        const domain = ownStore(request.caller!, request.params.domain);
        const items = await outbox.listForStore(domain, request.query.limit);
        return { items: items.map(({ storeDomain: _store, from: _from, ...mail }) => mail) };
      },
    });
  };
}

/** A store's alert queue: who waits for what, the ledger per status, restocks in progress (HTTP and MCP). */
export async function readAlertQueue(service: DispatchService, alerts: AlertService, domain: string) {
  const [waiting, counts, heldByPlan, restocks] = await Promise.all([
    alerts.waitingCounts(domain),
    service.ledgerCounts(domain),
    service.heldByPlan(domain),
    service.listRestocks(domain, 50),
  ]);
  return {
    waiting,
    totalWaiting: waiting.reduce((sum, entry) => sum + entry.waiting, 0),
    alerts: { queued: 0, sending: 0, sent: 0, skipped: 0, failed: 0, ...counts },
    heldByPlan,
    restocks: restocks.map(presentRestock),
  };
}

function presentRestock(row: RestockRow) {
  return {
    restockId: row.id,
    productId: row.product_id,
    variantId: row.variant_id,
    status: row.status as 'dispatching',
    availableAtDetection: row.available,
    batches: row.batches,
    planned: row.planned,
    detectedAt: row.detected_at,
    nextBatchAt: row.status === 'dispatching' ? row.next_batch_at : null,
    stopReason: row.stop_reason,
    source: row.source,
  };
}

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
