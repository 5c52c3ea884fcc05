import { WebhookValidationErrorReason } from '@shopify/shopify-api';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isUnavailableError } from '../core/db/dialect.ts';
import { rawBodyOf, takeRawBodies } from '../core/http/raw-body.ts';
import { Problem, ServiceUnavailable } from '../core/problems.ts';
import { shopifyShopSchema } from '../stores/schemas.ts';
import { isHandledTopic } from './payloads.ts';
import type { ShopifyApi } from './shopify-api.ts';
import type { WebhookEventRepository } from './webhook-events.ts';

/** Shopify's payloads (a product with many variants) outgrow the API's body limit; this route alone takes more. */
export const WEBHOOK_BODY_LIMIT = 1024 * 1024;

export interface VerifiedWebhook {
  eventId: string;
  webhookId: string;
  shop: string;
  topic: string;
  triggeredAt: string | null;
  payload: string;
}

/**
 * `POST /webhooks/shopify`, one endpoint for every topic. The body is kept as the bytes Shopify
 * signed, verified with the library, and queued; the work is done by the worker, so the answer
 * goes back well within Shopify's 5-second timeout.
 */
export function webhookRoutes(options: { shopify: ShopifyApi; events: WebhookEventRepository; baseUrl: string }) {
  const { shopify, events, baseUrl } = options;
  return async function (app: FastifyInstance) {
    // The HMAC covers the raw bytes; this route has its own body limit.
    takeRawBodies(app, { bodyLimit: WEBHOOK_BODY_LIMIT, baseUrl, sender: 'Shopify' });

    app.post('/webhooks/shopify', {
      bodyLimit: WEBHOOK_BODY_LIMIT,
      schema: { hide: true },
      handler: async (request, reply) => {
        const webhook = await verifyWebhook(shopify, request);
        let outcome: Awaited<ReturnType<typeof enqueueWebhookEvent>>;
        try {
          outcome = await enqueueWebhookEvent(events, webhook);
        } catch (err) {
          // Not stored: Shopify must deliver again, which a 503 asks for without claiming a bug.
          if (!isUnavailableError(err)) request.log.error({ err }, 'Shopify webhook could not be stored');
          throw new ServiceUnavailable('The delivery could not be stored; deliver it again.');
        }
        request.log.debug({ shop: webhook.shop, topic: webhook.topic, eventId: webhook.eventId, outcome }, 'Shopify webhook received');
        return reply.code(200).send({ status: outcome });
      },
    });
  };
}

/**
 * The delivery, once the library has checked its HMAC (SHA-256 over the raw body with the app's
 * secret, compared in constant time) and its headers. Anything unsigned is refused before a
 * byte of it is stored.
 */
export async function verifyWebhook(shopify: ShopifyApi, request: FastifyRequest): Promise<VerifiedWebhook> {
  const raw = rawBodyOf(request);
  // The library signs text; bytes that are not UTF-8 would be altered by decoding, so the
  // signature would not be over what Shopify sent. Shopify only sends UTF-8 JSON.
  const text = decodeUtf8(raw);
  if (text === undefined) throw new Problem('invalid-webhook', 'The body is not UTF-8, so it cannot carry a valid signature.');

  let check: Awaited<ReturnType<ShopifyApi['webhooks']['validate']>>;
  try {
    check = await shopify.webhooks.validate({ rawBody: text, rawRequest: request.raw });
  } catch {
    throw new Problem('invalid-webhook', 'The signature could not be checked.');
  }
  if (!check.valid) {
    if (check.reason === WebhookValidationErrorReason.MissingHeaders && 'missingHeaders' in check) {
      throw new Problem('malformed-request', `A signed delivery lacks Shopify's headers: ${check.missingHeaders.join(', ')}.`);
    }
    throw new Problem('invalid-webhook', describeInvalid(check.reason));
  }

  const shop = shopifyShopSchema.safeParse(check.domain.toLowerCase());
  if (!shop.success) throw new Problem('malformed-request', 'X-Shopify-Shop-Domain is not a myshopify.com domain.');
  if (!isJsonObject(text)) throw new Problem('malformed-request', 'The body is not a JSON object.');
  return {
    // Every delivery of one event shares its event id; older deliveries lack it, and then each
    // delivery's webhook id is the best key there is.
    eventId: check.eventId ?? check.webhookId,
    webhookId: check.webhookId,
    shop: shop.data,
    topic: check.topic,
    triggeredAt: isoOrNull(check.triggeredAt),
    payload: text,
  };
}

/** Queues a verified delivery once per event; topics we do not act on are recorded as done. */
export async function enqueueWebhookEvent(events: WebhookEventRepository, webhook: VerifiedWebhook): Promise<'queued' | 'duplicate' | 'ignored'> {
  const handled = isHandledTopic(webhook.topic);
  const inserted = await events.insert({
    eventId: webhook.eventId,
    storeDomain: webhook.shop,
    topic: webhook.topic,
    webhookId: webhook.webhookId,
    payload: webhook.payload,
    triggeredAt: webhook.triggeredAt,
    status: handled ? 'queued' : 'done',
  });
  if (!inserted) return 'duplicate';
  return handled ? 'queued' : 'ignored';
}

function describeInvalid(reason: string): string {
  switch (reason) {
    case WebhookValidationErrorReason.MissingHmac:
      return 'X-Shopify-Hmac-Sha256 is missing.';
    case WebhookValidationErrorReason.MissingBody:
      return 'The body is empty, so there is nothing signed.';
    default:
      return 'X-Shopify-Hmac-Sha256 does not match the body.';
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function decodeUtf8(bytes: Buffer): string | undefined {
  try {
    return utf8.decode(bytes);
  } catch {
    return undefined;
  }
}

function isJsonObject(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

function isoOrNull(value: string | undefined): string | null {
  if (!value) return null;
  const time = Date.parse(value);
  return Number.isNaN(time) ? null : new Date(time).toISOString();
}
