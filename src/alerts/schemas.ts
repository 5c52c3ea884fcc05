import { z } from 'zod';
import { signUpFields, signUpIssues } from '../channels.ts';
import { STRICT_OUTBOUND } from '../core/net/outbound-guard.ts';
import { emailSchema } from '../core/email.ts';
import { PLATFORM_NAME, platformOfId } from '../core/platforms.ts';
import { shopSchema } from '../stores/schemas.ts';

export const productIdSchema = z
  .string()
  .regex(new RegExp(`^gid://${PLATFORM_NAME}/Product/[0-9]{1,20}$`), 'must look like gid://<platform>/Product/<numeric id>, e.g. gid://shopify/Product/123')
  .describe('Platform product global ID, shape gid://<platform>/Product/<numeric_id>, e.g. gid://shopify/Product/123 or gid://woocommerce/Product/77');

export const variantIdSchema = z
  .string()
  .regex(new RegExp(`^gid://${PLATFORM_NAME}/ProductVariant/[0-9]{1,20}$`), 'must look like gid://<platform>/ProductVariant/<numeric id>, e.g. gid://shopify/ProductVariant/456')
  .describe('Platform variant global ID, shape gid://<platform>/ProductVariant/<numeric_id>, e.g. gid://shopify/ProductVariant/456');

export const subscriptionStatusSchema = z
  .enum(['pending', 'active', 'notified', 'unsubscribed', 'cancelled', 'expired'])
  .describe('pending: waiting for the shopper to confirm (stores that ask for double opt-in; never alerted until confirmed, expired if not); active: waiting for a restock; notified: the alert was sent; unsubscribed: by the shopper; cancelled: through the API; expired: no restock in time');

/** Ids are our own opaque tokens; anything outside their alphabet is refused before storage sees it. */
export const subscriptionIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be a subscription id such as sub_...')
  .describe('Identifier of the subscription');

export { consentTextSchema } from '../core/consent.ts';

/** ISO 3166-1 alpha-2, as storefronts and Shopify's markets name countries. */
export const countrySchema = z
  .string()
  .regex(/^[A-Z]{2}$/, 'must be a two-letter country code such as US')
  .describe("The shopper's country (ISO 3166-1 alpha-2), when known: the alert goes only once the product is on sale there");

export const subscribeAlertBody = z
  .object({
    productId: productIdSchema,
    variantId: variantIdSchema.nullish().describe('Variant to watch; omit to be alerted when any variant is restocked'),
    email: emailSchema.describe('Address to notify'),
    shop: shopSchema
      .optional()
      .describe("The merchant's store the product belongs to; an agent bound to a store subscribes for that store"),
    country: countrySchema.optional(),
    callbackUrl: z
      .string()
      .max(2048)
      .optional()
      .describe(
        "Where to tell the agent of this subscription's news (the product back in stock, the alert sent, clicked, an order credited to it): an https URL, posted signed per Standard Webhooks and HTTP Message Signatures; again with another URL replaces it (docs/agents.md#callbacks)",
      ),
    // Each channel's fields beside e-mail (the channel registry's).
    ...signUpFields('agent', STRICT_OUTBOUND),
  })
  .superRefine((body, ctx) => {
    for (const issue of signUpIssues(body, 'agent')) ctx.addIssue({ code: 'custom', ...issue });
  })
  .refine((body) => !body.variantId || platformOfId(body.variantId) === platformOfId(body.productId), { message: 'must be a variant of the same platform as productId', path: ['variantId'] })
  .describe('Alert subscription request');

export const subscribeAlertResponse = z
  .object({
    subscriptionId: subscriptionIdSchema,
    status: subscriptionStatusSchema.describe('`active` for a created subscription; `pending` when the store asks shoppers to confirm (double opt-in): the shopper is e-mailed a confirmation link, and the subscription is alerted only once confirmed'),
    callbackSecret: z
      .string()
      .optional()
      .describe("The agent's `whsec_` secret that signs its callbacks (Standard Webhooks), given once: in the answer that first gave a callbackUrl"),
  })
  .describe('The created (or already existing) subscription');

export const subscriptionParams = z.object({ subscriptionId: subscriptionIdSchema });

export const subscriptionSchema = z
  .object({
    subscriptionId: subscriptionIdSchema,
    status: subscriptionStatusSchema,
    productId: productIdSchema,
    variantId: variantIdSchema.nullable(),
    shop: z.string().nullable().describe('The store the subscription belongs to, when known'),
    email: z.string().describe('Address to notify'),
    createdAt: z.string().describe('ISO-8601 time the subscription was created'),
    updatedAt: z.string().describe('ISO-8601 time of the last status change'),
    unsubscribeUrl: z.url().describe('One-click unsubscribe link for the subscriber'),
  })
  .describe('A stored alert subscription');

export type SubscribeAlertInput = z.infer<typeof subscribeAlertBody>;
export type Subscription = z.infer<typeof subscriptionSchema>;
export type SubscriptionStatus = z.infer<typeof subscriptionStatusSchema>;
