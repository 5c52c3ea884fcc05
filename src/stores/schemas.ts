import { z } from 'zod';
import { STOREFRONT_OFFERS, type ContactChannel } from '../channels.ts';
import { alertTemplateSchema, localeSchema, storeSettingsSchema } from './settings.ts';
import { parseSmtpUrl, SmtpUrlError } from '../core/mail/smtp-url.ts';

/** What other modules read of the stores' settings. */
export { DEFAULT_UTM, localeSchema, parseStoredSettings, timeZoneSchema, type EffectiveSettings } from './settings.ts';

/**
 * A store's identifier: the host name its shoppers know it by, lower-cased on the way in (a
 * Shopify store's is its myshopify.com domain, a WooCommerce store's its site's host). Never an IP
 * address or a single-label name: the identifier is also where its shop is. Each label is taken
 * as myshopify.com domains always were (a letter or digit, then up to 62 of them or hyphens).
 */
export const shopSchema = z
  .string()
  .max(253)
  .regex(
    /^(?=.{1,253}$)([a-zA-Z0-9][a-zA-Z0-9-]{0,62}\.)+[a-zA-Z][a-zA-Z0-9-]{0,62}$/,
    'must be a store domain such as my-store.myshopify.com or shop.example.com',
  )
  .describe("Identifier of the merchant's store: its domain (my-store.myshopify.com for a Shopify store, the site's host for WooCommerce, store-<hash>.mybigcommerce.com for BigCommerce)");

/** A Shopify store's identifier, where only Shopify's own may be named (its install, its webhooks, its app proxy). */
export const shopifyShopSchema = z
  .string()
  .max(255)
  .regex(/^[a-zA-Z0-9][a-zA-Z0-9-]{0,62}\.myshopify\.com$/, 'must be a store domain such as my-store.myshopify.com')
  .describe("Identifier of the merchant's Shopify store: its myshopify.com domain");

/** The store an operation names: in the path (`/api/v1/stores/:shop/…`) or as a tool's argument. */
export const storeInput = z.object({ shop: shopSchema });

export const storeParams = z.object({ domain: shopSchema });

/** Store domains that tell their platform by themselves (a Shopify store's *.myshopify.com), as the platform registry lists them. */
export type StoreDomains = ReadonlyArray<readonly [RegExp, string]>;

/** The platform a store's domain names by itself, if it does (a custom domain does not). */
export function platformOfDomain(domains: StoreDomains, domain: string): string | undefined {
  const lower = domain.toLowerCase();
  return domains.find(([pattern]) => pattern.test(lower))?.[1];
}

/** Each channel's storefront switch in force; nullable where unset depends on the store (SMS: a sender). */
function switchesInForceSchema(): Record<ContactChannel, z.ZodType<boolean | null>> {
  return Object.fromEntries(
    STOREFRONT_OFFERS.map(([channel, offer]) => [channel, (offer.byDefault === null ? z.boolean().nullable() : z.boolean()).describe(offer.inForce)]),
  ) as unknown as Record<ContactChannel, z.ZodType<boolean | null>>;
}

const effectiveSettingsSchema = z
  .object({
    batchMultiplier: z.number().describe('Subscribers mailed per unit in stock, per batch'),
    batchIntervalSeconds: z.number().describe('Wait between batches of one restock'),
    minStock: z.number().describe('Fewest units for a restock to be announced'),
    frequencyCapMinutes: z.number().describe('At most one alert per address in this window (0: no cap)'),
    locale: localeSchema,
    senderName: z.string().optional(),
    template: alertTemplateSchema,
    utm: z.object({ source: z.string(), medium: z.string(), campaign: z.string() }).describe('UTM parameters of alert links'),
    attributionWindowDays: z.number().describe('Days after an alert in which an order is credited to it'),
    reminderDelayHours: z.number().nullable().describe('Hours after an alert its reminder goes; null: no reminders'),
    reserveUnitsMinutes: z.number().describe("Minutes a unit is held for each shopper of a restock's first batch when the restock is smaller than the waiting list (Shopify stores); 0: no holds"),
    waitlistThreshold: z.number().nullable().describe("Waiting shoppers per product or variant at which the owner is told; null: never"),
    weeklyDigest: z.boolean().describe("The owner gets a weekly digest by e-mail"),
    doubleOptIn: z.enum(['auto', 'always', 'never']).describe('Whether new e-mail subscriptions wait for the shopper’s confirmation (auto: EU/EEA, UK, CH)'),
    country: z.string().nullable().describe("The store's country (ISO 3166-1 alpha-2), for doubleOptIn auto"),
    smsQuietHours: z.object({ start: z.number(), end: z.number() }).describe('No SMS between these hours, local to the shopper'),
    timeZone: z.string().describe("The store's time zone, for quiet hours when the shopper's is unknown"),
    ...switchesInForceSchema(),
  })
  .describe('Batch policy, language and template in force (the store’s own values, else the defaults)');

export const storeSchema = z
  .object({
    domain: z.string().describe('The store domain, e.g. my-store.myshopify.com or shop.example.com'),
    ownerEmail: z.string().describe('The person answerable for the store; agents they claim can be bound to it'),
    createdAt: z.string(),
    status: z.enum(['active', 'uninstalled']).describe('uninstalled: the store was disconnected (the Shopify app removed, the WooCommerce or BigCommerce connection ended) and nothing is sent'),
    platform: z.string().describe("The platform the store runs on (shopify, woocommerce, bigcommerce, ...): its products' ids are gid://<platform>/..."),
    installedAt: z.string().nullable(),
    adminApiConnected: z
      .boolean()
      .describe('The service holds a working Admin API token for reconciliation and lookups; false once Shopify refused to refresh it, until the merchant opens the app from their Shopify admin again'),
    ownSmtp: z.boolean().describe("Alerts go through the store's own SMTP server"),
    ownSmsSender: z.boolean().describe("SMS alerts go from the store's own Twilio account"),
    settings: effectiveSettingsSchema,
    plan: z
      .object({
        plan: z.string().describe('starter, growth, or free when no plan is in force'),
        status: z.enum(['active', 'past_due', 'none']),
        monthlyAlertQuota: z.number().int(),
        used: z.number().int().describe('Alerts counted in the current period'),
        periodStart: z.string(),
        periodEnd: z.string(),
        requiresOwnMailProvider: z.boolean(),
        overage: z
          .object({
            billed: z.boolean().describe('Whether alerts beyond the allowance go out, billed per alert (a paid plan whose provider bills them); false: they wait for the next period'),
            pricePerAlert: z.number().describe('USD per alert beyond the allowance'),
            ceiling: z.number().describe('The most alerts beyond the allowance may cost this period, in USD, as the owner set it (or the plan’s default); past it they wait'),
            alerts: z.number().int().describe('Alerts sent beyond the allowance this period'),
            amount: z.number().describe('What they cost, in USD'),
            currency: z.literal('USD'),
          })
          .describe('Alerts beyond the allowance: billed per alert up to the ceiling, never held before it'),
      })
      .describe('The plan in force and its allowance'),
  })
  .describe("A merchant's store and its configuration");

export type StorePlanUsage = z.infer<typeof storeSchema>['plan'];

/** The URL must parse as the mail transport will read it; the message never repeats the URL. */
function refuseUnreadableSmtpUrl(value: string, context: z.RefinementCtx): void {
  try {
    parseSmtpUrl(value, { options: 'none' });
  } catch (err) {
    if (!(err instanceof SmtpUrlError)) throw err;
    context.addIssue({ code: 'custom', message: err.message });
  }
}

/** A Twilio account and sender, as a store gives it. */
export const smsAccountSchema = z
  .object({
    accountSid: z.string().regex(/^AC[0-9a-f]{32}$/, 'must be a Twilio Account SID (AC followed by 32 hex digits)'),
    authToken: z.string().regex(/^[0-9a-f]{32}$/, 'must be a Twilio auth token (32 hex digits)'),
    from: z
      .string()
      .regex(/^(\+[1-9][0-9]{6,14}|MG[0-9a-f]{32})$/, 'must be an E.164 number (+15551234567) or a Messaging Service SID (MG…)')
      .describe('The number (E.164) or Messaging Service SID texts come from'),
  })
  .strict();

/** Each settings field may be set, or `null` to return to the default. */
export const storeSettingsPatch = z
  .object({
    ...Object.fromEntries(Object.entries(storeSettingsSchema.shape).map(([key, field]) => [key, field.unwrap().nullable().optional()])),
    smtpUrl: z
      .string()
      .max(2048)
      .regex(/^smtps?:\/\/[^\s]+$/, 'must be an smtp:// or smtps:// URL')
      .superRefine(refuseUnreadableSmtpUrl)
      .nullable()
      .optional()
      .describe("The store's own SMTP server, credentials included (kept sealed); null to use the service's"),
    smsSender: smsAccountSchema
      .nullable()
      .optional()
      .describe(
        "The store's own Twilio account its SMS alerts are sent from (kept sealed); null to use the service's. Twilio is asked first: the account must be active and `from` one of its numbers or Messaging Services, else 400 and nothing is saved (502 when Twilio cannot be reached)",
      ),
  })
  .strict()
  .describe('Changes to a store’s settings');

/** A store as this feature knows it; the routes add the plan from the billing feature. */
export type Store = Omit<z.infer<typeof storeSchema>, 'plan'>;

export type StoreSettingsPatch = z.output<typeof storeSettingsPatch>;
