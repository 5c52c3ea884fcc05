import { z } from 'zod';
import { CHANNEL_NAMES } from '../channels.ts';
import { productIdSchema, variantIdSchema } from '../alerts/schemas.ts';
import { shopSchema } from '../stores/schemas.ts';

const currencySchema = z
  .string()
  .regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code such as EUR')
  .describe('ISO 4217 currency code');

const minorUnits = z.int().min(0).max(1_000_000_000_000).describe("Integer amount in the currency's minor unit (cents; yen have none)");

const lineIdSchema = z.string().min(1).max(100).regex(/^[\x21-\x7e]+$/, 'printable characters only');
export const orderIdSchema = z.string().min(1).max(100).regex(/^[\x21-\x7e]+$/, 'printable characters only').describe("The platform's order id, unique per store");


export const reportOrderBody = z
  .object({
    orderId: orderIdSchema,
    email: z.email().max(254).nullable().describe("The buyer's address; null when the order has none (then nothing is credited)"),
    placedAt: z.iso.datetime({ offset: true }).describe('When the order was placed'),
    currency: currencySchema.describe('The currency the shopper paid in'),
    shopCurrency: currencySchema.optional().describe("The store's own currency; default: the same as currency"),
    lines: z
      .array(
        z
          .object({
            lineId: lineIdSchema.describe('Unique within the order; refunds name it'),
            productId: productIdSchema,
            variantId: variantIdSchema.nullish(),
            quantity: z.int().min(1).max(1_000_000),
            amountMinor: minorUnits.describe('What the shopper paid for the line after its discounts'),
            shopAmountMinor: minorUnits.optional().describe("The same in the store's currency; default: amountMinor"),
          })
          .strict(),
      )
      .min(1)
      .max(250),
  })
  .strict()
  .describe('An order of another platform: only what attribution needs, no names, addresses or payment details');

export const reportRefundBody = z
  .object({
    refundId: z.string().min(1).max(100).regex(/^[\x21-\x7e]+$/).describe('Unique per order: a refund reported twice is taken back once'),
    refundedAt: z.iso.datetime({ offset: true }),
    currency: currencySchema.describe('The currency the shopper was refunded in (the order’s)'),
    shopCurrency: currencySchema.optional().describe("The store's own currency; default: the same as currency"),
    lines: z
      .array(
        z
          .object({
            lineId: lineIdSchema,
            quantity: z.int().min(0).max(1_000_000),
            amountMinor: minorUnits,
            shopAmountMinor: minorUnits.optional(),
          })
          .strict(),
      )
      .min(1)
      .max(250),
  })
  .strict()
  .describe('A refund of some lines of an order reported before');

export const reportCancellationBody = z.object({ cancelledAt: z.iso.datetime({ offset: true }) }).strict();

export const orderAcceptedResponse = z.object({ accepted: z.literal(true) }).describe('Recorded; credited to alerts when its buyer was alerted');

const moneySchema = z.object({ currency: z.string(), minor: z.number().int() });

export const performanceQuery = z.object({ days: z.coerce.number().int().min(1).max(365).default(30).describe('How many days back, today included') }).strict();

export const performanceResponse = z
  .object({
    shop: z.string(),
    from: z.string(),
    to: z.string(),
    days: z.number().int(),
    waiting: z.number().int().describe('Shoppers waiting now'),
    sent: z.number().int().describe('Alerts sent in the period (reminders not included)'),
    reminders: z.number().int(),
    clicks: z.number().int().describe("Alerts whose link a shopper followed (bots and mail scanners' prefetches not counted)"),
    orders: z.object({ direct: z.number().int(), assisted: z.number().int(), total: z.number().int() }).describe('Orders credited to alerts: direct after a click, assisted without'),
    conversionRate: z.number().describe('Credited orders per alert sent'),
    clickRate: z.number().describe('Clicks per alert sent'),
    revenue: z.array(moneySchema).describe("Revenue won back, net of refunds and cancellations, in the store's currency"),
    revenueByPresentmentCurrency: z.array(moneySchema).describe('The same in the currencies shoppers paid in'),
    byDay: z.array(z.object({ day: z.string(), sent: z.number().int(), clicks: z.number().int(), orders: z.number().int(), revenueMinor: z.number().int() })),
    byChannel: z
      .array(z.object({ channel: z.enum(CHANNEL_NAMES), sent: z.number().int(), clicks: z.number().int(), orders: z.number().int(), revenueMinor: z.number().int() }))
      .describe("What each channel did: alerts sent, clicks, credited orders and net revenue in the store's currency (minor units)"),
    products: z.array(
      z.object({
        productId: z.string(),
        variantId: z.string().nullable(),
        title: z.string().nullable(),
        waiting: z.number().int(),
        sent: z.number().int(),
        clicked: z.number().int(),
        ordered: z.number().int(),
        revenue: z.array(moneySchema),
      }),
    ),
  })
  .describe('What alerts did: sends, clicks, orders and revenue won back');

export const exportKinds = ['subscribers', 'alerts', 'orders'] as const;
export const exportParams = z.object({ shop: shopSchema, kind: z.enum(exportKinds).describe('subscribers, alerts (the ledger) or orders (attributed order lines)') });
