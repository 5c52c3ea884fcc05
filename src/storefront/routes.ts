import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { problemResponses } from '../core/http/openapi-responses.ts';
import { availabilityQuery, availabilityResponse, shopperSubscribeBody, shopperSubscribeResponse } from './schemas.ts';
import type { OutboundPolicy } from '../core/net/outbound-guard.ts';
import type { StorefrontService } from './service.ts';
import { SERVED_WIDGET_FILES, type ServedWidgetFile, type WidgetAsset } from './widget-asset.ts';

/**
 * What a store's product pages load: the widget script (and its channels script, which it loads
 * only when the service offers SMS or push, and its platforms script, which it loads only on other
 * platforms than Shopify) and the two calls it makes. Public, with no cookies or
 * tokens, so any store's origin may call them (CORS `*`); abuse is held off by a per-address limit
 * on subscribing.
 */
export function storefrontRoutes(service: StorefrontService, scripts: Record<ServedWidgetFile, WidgetAsset>, policy: OutboundPolicy) {
  const subscribeBody = shopperSubscribeBody(policy);
  return async function (app: FastifyInstance) {
    const api = app.withTypeProvider<ZodTypeProvider>();

    for (const file of SERVED_WIDGET_FILES) {
      app.get(`/${file}`, { schema: { hide: true } }, async (request, reply) => sendWidget(request, reply, scripts[file]));
    }

    api.get('/storefront/v1/availability', {
      config: { rateLimitByAddress: 'storefront-read' },
      schema: {
        operationId: 'getStorefrontAvailability',
        summary: "Whether a product's variants are sold out (for the storefront widget)",
        tags: ['storefront'],
        querystring: availabilityQuery,
        response: { 200: availabilityResponse, 304: z.null().describe('Not modified: If-None-Match names the current ETag'), ...problemResponses(400, 429, 503) },
      },
      handler: async (request, reply) => {
        const { body, etag } = await service.availabilityAnswer(request.query.shop, request.query.productId);
        // Short: a restock should show on product pages within a minute. Set only on success,
        // so a refusal is never kept by a cache. A CDN or the browser revalidates with the ETag.
        reply.header('cache-control', 'public, max-age=30').header('etag', etag);
        // Listed in the document although no client asks for it by name: CDNs and browsers revalidate on their own.
        if (matchesIfNoneMatch(request.headers['if-none-match'], etag)) return (reply as FastifyReply).code(304).send();
        // Already JSON, built when the answer was kept.
        return reply.type('application/json; charset=utf-8').serializer(String).send(body as never);
      },
    });

    api.post('/storefront/v1/subscribe', {
      config: { rateLimitByAddress: 'storefront' },
      schema: {
        operationId: 'subscribeShopper',
        summary: 'A shopper asks to be e-mailed when a sold-out product is back (the storefront widget)',
        tags: ['storefront'],
        body: subscribeBody,
        response: { 201: shopperSubscribeResponse, ...problemResponses(400, 404, 413, 415, 429, 503) },
      },
      handler: async (request, reply) => reply.code(201).send(await service.subscribeShopper(request.body)),
    });
  };
}

/** One of the storefront scripts, from memory: gzipped when the client takes it, revalidated by ETag. */
function sendWidget(request: FastifyRequest, reply: FastifyReply, widget: WidgetAsset) {
  const gzipped = acceptsGzip(request.headers['accept-encoding']);
  const etag = gzipped ? widget.gzippedEtag : widget.etag;
  reply
    .header('cache-control', 'public, max-age=300, stale-while-revalidate=86400')
    .header('etag', etag)
    .header('vary', 'accept-encoding')
    // Stores that isolate their pages (COEP) may still load it.
    .header('cross-origin-resource-policy', 'cross-origin')
    .type('text/javascript; charset=utf-8');
  if (matchesIfNoneMatch(request.headers['if-none-match'], etag)) return reply.code(304).send();
  if (gzipped) return reply.header('content-encoding', 'gzip').send(widget.gzipped);
  return reply.send(widget.body);
}

/** gzip is acceptable unless absent or refused with q=0 (RFC 9110 §12.5.3). */
function acceptsGzip(header: string | undefined): boolean {
  for (const part of (header ?? '').split(',')) {
    const [coding, ...params] = part.trim().toLowerCase().split(';');
    if (coding !== 'gzip' && coding !== '*') continue;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  }
  return false;
}

/** If-None-Match uses the weak comparison (RFC 9110 §13.1.2): `W/` is ignored, `*` matches. */
function matchesIfNoneMatch(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  return header.split(',').some((tag) => {
    const trimmed = tag.trim();
    return trimmed === '*' || trimmed.replace(/^W\//, '') === etag;
  });
}
