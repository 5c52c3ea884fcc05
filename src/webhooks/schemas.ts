import { z } from 'zod';
import { storeEventTypes } from '../core/events.ts';
import { shopSchema } from '../stores/schemas.ts';

/** At most this many endpoints per store. */
export const MAX_ENDPOINTS_PER_STORE = 10;

export const eventTypeSchema = z.enum(storeEventTypes).describe('An event a store announces');

export const endpointIdSchema = z.string().min(1).max(64).regex(/^whe_[0-9a-z]+$/, 'must be a webhook endpoint id (whe_...)').describe('The endpoint, as its creation answered');


const urlField = z
  .string()
  .min(1)
  .max(2048)
  .describe('Where the events are POSTed: an http:// or https:// URL on the internet, without credentials (a token in its path or query is fine)');

const eventTypesField = z
  .array(eventTypeSchema)
  .min(1)
  .max(storeEventTypes.length)
  .refine((types) => new Set(types).size === types.length, 'lists a type twice')
  .describe('The event types this endpoint takes');

export const createEndpointBody = z
  .object({
    url: urlField,
    eventTypes: eventTypesField.optional().describe('The event types this endpoint takes; every type when left out'),
  })
  .strict();

export const updateEndpointBody = z
  .object({
    url: urlField.optional(),
    eventTypes: eventTypesField.optional(),
    enabled: z.boolean().optional().describe('false stops deliveries (pending ones are cancelled); true resumes them and forgets past failures'),
  })
  .strict()
  .refine((patch) => Object.keys(patch).length > 0, 'names at least one of url, eventTypes, enabled');

export type CreateEndpointInput = z.infer<typeof createEndpointBody>;
export type UpdateEndpointInput = z.infer<typeof updateEndpointBody>;

export const endpointSchema = z
  .object({
    endpointId: z.string(),
    url: z.string(),
    eventTypes: z.array(eventTypeSchema),
    enabled: z.boolean(),
    disabledReason: z.string().nullable().describe('Why deliveries stopped: by the store, or after failing too long'),
    disabledAt: z.string().nullable(),
    consecutiveFailures: z.number().int().describe('Failed attempts since the last success'),
    failingSince: z.string().nullable().describe('The first failed attempt since the last success'),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .describe("An endpoint receiving the store's events, signed per Standard Webhooks");

export type Endpoint = z.infer<typeof endpointSchema>;

export const createdEndpointSchema = endpointSchema
  .extend({
    secret: z
      .string()
      .describe('The signing secret (whsec_...), shown this once: verify each delivery with it (webhook-id, webhook-timestamp, webhook-signature)'),
  })
  .describe('The new endpoint and its signing secret');

export type CreatedEndpoint = z.infer<typeof createdEndpointSchema>;

export const endpointListSchema = z.object({ items: z.array(endpointSchema) });

export const deliveriesQuery = z.object({ limit: z.coerce.number().int().min(1).max(200).default(50) }).strict();

const attemptSchema = z.object({
  attempt: z.number().int(),
  attemptedAt: z.string(),
  statusCode: z.number().int().nullable().describe('The status of the last answer, redirects followed; null when none came'),
  error: z.string().nullable(),
  durationMs: z.number().int(),
});

export const deliverySchema = z
  .object({
    deliveryId: z.string(),
    eventId: z.string().describe('Sent as webhook-id'),
    eventType: eventTypeSchema,
    status: z.enum(['pending', 'delivered', 'failed', 'cancelled']).describe('pending: waiting for its next attempt; failed: given up; cancelled: its endpoint was disabled'),
    attempts: z.number().int(),
    nextAttemptAt: z.string().nullable(),
    lastError: z.string().nullable(),
    createdAt: z.string(),
    finishedAt: z.string().nullable(),
    log: z.array(attemptSchema).describe('Each attempt, in order'),
  })
  .describe('One event for one endpoint, and its attempts');

export type Delivery = z.infer<typeof deliverySchema>;

export const deliveryListSchema = z.object({ items: z.array(deliverySchema) });
