import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { problemResponses } from '../core/http/openapi-responses.ts';
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
import type { NotificationRow, SuppressionRow } from './repository.ts';

/** Reading the alert queue and ledger, managing suppressions, and the local outbox. */
export function dispatchRoutes(service: DispatchService) {
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
      handler: (request) => service.readAlertQueue(request.caller!, request.params.domain),
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
        const rows = await service.listNotifications(request.caller!, request.params.domain, request.query);
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
      handler: async (request) => ({ items: (await service.suppressionsOf(request.caller!, request.params.domain)).map(presentSuppression) }),
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
        const { email, reason, detail } = request.body;
        return presentSuppression(await service.suppressAddress(request.caller!, request.params.domain, email, reason, detail ?? null));
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
        const { domain, email } = request.params;
        if (!(await service.unsuppressAddress(request.caller!, domain, email))) throw new NotFound(`${email} is not suppressed for ${domain.toLowerCase()}.`);
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
        const items = await service.listOutbox(request.caller!, request.params.domain, request.query.limit);
        return { items: items.map(({ storeDomain: _store, from: _from, ...mail }) => mail) };
      },
    });
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
