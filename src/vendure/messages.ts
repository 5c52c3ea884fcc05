import { z } from 'zod';

/**
 * What the Restock plugin for Vendure delivers (extensions/vendure-plugin/src/messages.ts is the
 * sending side): stock news as ids, which the service reads back, and orders as attribution
 * reads them. Ids are Vendure's default numeric ids.
 */
const id = z.string().regex(/^[0-9]{1,18}$/, 'must be a Vendure id');
const code = z.string().min(1).max(64);
const currency = z.string().regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code');
const minor = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const instant = z.string().datetime({ offset: true });

export const orderMessageSchema = z.object({
  code,
  email: z.string().max(320).nullable(),
  placedAt: instant,
  currency,
  lines: z
    .array(z.object({ lineId: id, productId: id, variantId: id, quantity: z.number().int().min(0).max(1_000_000), amount: minor }))
    .max(1_000),
});

export const vendureMessageSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('variants.changed'), variantIds: z.array(id).min(1).max(1_000) }),
  z.object({ type: z.literal('products.changed'), productIds: z.array(id).min(1).max(1_000) }),
  z.object({ type: z.literal('catalog.changed') }),
  z.object({ type: z.literal('order.placed'), order: orderMessageSchema }),
  z.object({ type: z.literal('order.paid'), order: orderMessageSchema }),
  z.object({ type: z.literal('order.cancelled'), code, cancelledAt: instant }),
  z.object({
    type: z.literal('order.refunded'),
    code,
    refundId: id,
    refundedAt: instant,
    currency,
    lines: z.array(z.object({ lineId: id, quantity: z.number().int().min(0).max(1_000_000), amount: minor })).max(1_000),
  }),
  z.object({ type: z.literal('app.uninstalled') }),
]);
export type VendureMessage = z.infer<typeof vendureMessageSchema>;
export type OrderMessage = z.infer<typeof orderMessageSchema>;
