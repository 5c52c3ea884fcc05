import { z } from 'zod';
import { countrySchema, productIdSchema, variantIdSchema } from '../alerts/schemas.ts';
import { emailSchema } from '../core/email.ts';
import { shopSchema } from '../stores/schemas.ts';
import { localeSchema } from '../stores/settings.ts';

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
  })
  .describe('What the widget needs to decide whether to offer an alert (quantities are not disclosed)');

export const shopperSubscribeBody = z
  .object({
    shop: shopSchema,
    productId: productIdSchema,
    variantId: variantIdSchema.nullish().describe('The variant the shopper had selected; null for the whole product'),
    email: emailSchema,
    locale: localeSchema.nullish().describe('The language the widget spoke; the alert is written in it (else in the store’s language)'),
    country: countrySchema.nullish(),
  })
  .describe("A shopper's request to hear when a product is back");

export const shopperSubscribeResponse = z
  .object({ status: z.literal('subscribed') })
  .describe('The same answer whether or not the address was already waiting, so the form reveals nothing about other shoppers');

export type ShopperSubscribeInput = z.infer<typeof shopperSubscribeBody>;
