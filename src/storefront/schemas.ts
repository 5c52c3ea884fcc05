import { z } from 'zod';
import { consentTextSchema, countrySchema, productIdSchema, variantIdSchema } from '../alerts/schemas.ts';
import type { OutboundPolicy } from '../core/net/outbound-guard.ts';
import { timeZoneSchema } from '../stores/schemas.ts';
import { CONFIRMED_CHANNELS, CONTACT_CHANNELS, signUpFields, signUpIssues, type ContactChannel } from '../channels.ts';
import { emailSchema } from '../core/email.ts';
import { shopSchema } from '../stores/schemas.ts';
import { localeSchema } from '../stores/schemas.ts';

export const availabilityQuery = z
  .object({ shop: shopSchema, productId: productIdSchema })
  .describe('The product a storefront page shows');

export const availabilityResponse = z
  .object({
    shop: z.string(),
    productId: productIdSchema,
    soldOut: z.boolean().nullable().describe('Whether every variant is sold out; null when the service knows nothing of the product'),
    variants: z
      .array(z.object({ variantId: variantIdSchema, soldOut: z.boolean() }))
      .describe('Variants whose stock the service knows; any other variant is unknown'),
    channels: z
      .object(Object.fromEntries(CONTACT_CHANNELS.map((channel) => [channel, z.boolean()])) as Record<ContactChannel, z.ZodBoolean>)
      .describe('What the sign-up form may offer beside e-mail, by channel: a phone number (SMS), "notify me in this browser" (web push); all false while nothing is sold out'),
  })
  .describe('What the widget needs to decide whether to offer an alert (quantities are not disclosed)');

/**
 * The body's fields: the sign-up's own, then each channel's (the channel registry's), under the
 * operator's outbound policy, which decides which push endpoints are accepted.
 */
function shopperSubscribeFields(policy: OutboundPolicy) {
  return z.object({
    shop: shopSchema,
    productId: productIdSchema,
    variantId: variantIdSchema.nullish().describe('The variant the shopper had selected; null for the whole product'),
    email: emailSchema,
    locale: localeSchema.nullish().describe('The language the widget spoke; the alert is written in it (else in the store’s language)'),
    country: countrySchema.nullish(),
    consentText: consentTextSchema.nullish().describe('The words shown next to the button, kept as the record of the e-mail consent'),
    page: z.url().max(2048).nullish().describe('The product page the shopper subscribed on, kept with the consent'),
    timeZone: timeZoneSchema.nullish().describe("The shopper's time zone (IANA), for SMS quiet hours"),
    ...signUpFields('storefront', policy),
  });
}

/** What must hold between each channel's fields (a phone needs its ticked consent), checked by the channel's rule. */
function channelRules(body: Record<string, unknown>, ctx: z.RefinementCtx): void {
  for (const issue of signUpIssues(body, 'storefront')) ctx.addIssue({ code: 'custom', ...issue });
}

export function shopperSubscribeBody(policy: OutboundPolicy) {
  return shopperSubscribeFields(policy).superRefine(channelRules).describe("A shopper's request to hear when a product is back");
}

/** The storefront's sign-up through Shopify's app proxy, less the store: there the store is the one Shopify signed. */
export function proxySubscribeBody(policy: OutboundPolicy) {
  return shopperSubscribeFields(policy).omit({ shop: true }).superRefine(channelRules);
}

export const shopperSubscribeResponse = z
  .object({
    status: z.literal('subscribed'),
    confirmBy: z
      .array(z.enum(CONFIRMED_CHANNELS))
      .describe('What the shopper must still do: click the link e-mailed to them (stores with double opt-in), reply YES to the text (SMS, always). Empty: nothing'),
  })
  .describe('The same answer whether or not the address was already waiting, so the form reveals nothing about other shoppers');

export type ShopperSubscribeInput = z.infer<ReturnType<typeof shopperSubscribeBody>>;
