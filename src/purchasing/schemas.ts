import { z } from 'zod';
import { shopSchema } from '../stores/schemas.ts';

/** Opaque to callers: the last row's rank, base64url (src/purchasing/cursor.ts). */
export const purchasingCursorSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,600}$/, 'must be a `next` value from an earlier page')
  .describe('The `next` of the page before; absent: the first page');

export const purchasingQuery = z
  .object({
    limit: z.coerce.number().int().min(1).max(500).default(100).describe('Rows per page'),
    cursor: purchasingCursorSchema.optional(),
  })
  .strict();

const money = z.object({ minor: z.number().int().describe("Amount in the currency's minor unit (cents; yen have none)"), currency: z.string().describe('ISO 4217 currency code') });

export const purchasingRowSchema = z.object({
  productId: z.string(),
  variantId: z.string().nullable().describe('null: shoppers waiting for the product as a whole'),
  productTitle: z.string().nullable(),
  variantTitle: z.string().nullable(),
  waiting: z.number().int().describe('Shoppers waiting now'),
  totalWaitSeconds: z.number().int().describe('Time waited so far by all of them together, in seconds'),
  meanWaitSeconds: z.number().int().describe('Time one of them has waited on average, in seconds'),
  price: money.nullable().describe('The current price, as the store last reported it; null while unknown'),
  potentialRevenue: money.nullable().describe('waiting × price: what they would bring if each bought one at the current price; null while the price is unknown'),
});

export const purchasingResponse = z
  .object({
    items: z.array(purchasingRowSchema).describe('Most shoppers waiting first, then the longest waited, then by product and variant'),
    next: z.string().nullable().describe('The cursor of the next page; null after the last'),
  })
  .describe('Waitlists ranked for purchasing');

export const purchasingCsvParams = z.object({ shop: shopSchema });
