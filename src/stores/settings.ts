import { z } from 'zod';
import type { BatchPolicy } from '../config.ts';
import { STOREFRONT_OFFERS, type ContactChannel } from '../channels.ts';
import { LANGUAGES } from '../core/languages.ts';

export const localeSchema = z.enum(LANGUAGES).describe('Language of the alert e-mails');

/** Placeholders a template may use, each filled in (HTML-escaped in the HTML template). */
export const templatePlaceholders = ['shop', 'product_title', 'variant_title', 'product_url', 'image_url', 'unsubscribe_url', 'manage_url', 'email'] as const;

const templateText = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .describe(`Text with {{placeholders}}: ${templatePlaceholders.join(', ')}`);

export const alertTemplateSchema = z
  .object({
    subject: templateText(200).optional(),
    text: templateText(8000).optional(),
    html: templateText(16000).optional(),
  })
  .strict()
  .describe("The store's own alert e-mail; parts left out use the built-in template of the store's locale");

const utmValue = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9._~-]+$/, 'letters, digits and . _ ~ - only');

/** The parameters a click on an alert's link lands with, so the store's own analytics credit alerts. */
export const utmSchema = z
  .object({
    source: utmValue.optional().describe('utm_source (default restock)'),
    medium: utmValue.optional().describe('utm_medium (default email)'),
    campaign: utmValue.optional().describe('utm_campaign (default back-in-stock)'),
  })
  .strict()
  .describe('UTM parameters added to the product link of every alert');

/** A time zone the runtime knows (IANA name); anything else is refused rather than guessed. */
export const timeZoneSchema = z
  .string()
  .max(64)
  .regex(/^[A-Za-z][A-Za-z0-9_+/-]*$/, 'must be an IANA time zone such as Europe/Paris')
  .refine(isKnownTimeZone, 'must be an IANA time zone such as Europe/Paris');

export function isKnownTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/** Hours (0–23, local to the shopper) between which no SMS is sent; a text due then waits until `end`. */
export const quietHoursSchema = z
  .object({ start: z.int().min(0).max(23), end: z.int().min(0).max(23) })
  .strict()
  .describe('No SMS from start to end o’clock in the shopper’s time zone (default 21 to 9); deferred, never dropped. start = end: no quiet hours');

export const DEFAULT_SMS_QUIET_HOURS = { start: 21, end: 9 } as const;

export const DEFAULT_UTM = { source: 'restock', medium: 'email', campaign: 'back-in-stock' } as const;
export const DEFAULT_ATTRIBUTION_WINDOW_DAYS = 7;

/** What a store may set for itself; anything unset follows the service's defaults. */
export const storeSettingsSchema = z
  .object({
    batchMultiplier: z.number().min(0.1).max(100).optional().describe('Subscribers mailed per unit in stock, per batch'),
    batchIntervalSeconds: z.int().min(0).max(7 * 24 * 3600).optional().describe('Wait between batches of one restock'),
    minStock: z.int().min(1).max(1_000_000).optional().describe('Fewest units for a restock to be announced'),
    frequencyCapMinutes: z.int().min(0).max(30 * 24 * 60).optional().describe('At most one alert per address in this window; later ones wait'),
    locale: localeSchema.optional(),
    senderName: z.string().min(1).max(100).regex(/^[^<>"\r\n]+$/, 'must be a plain name').optional().describe('Display name alerts come from'),
    template: alertTemplateSchema.optional(),
    utm: utmSchema.optional(),
    attributionWindowDays: z.int().min(1).max(90).optional().describe('An order this many days after an alert can be credited to it (default 7)'),
    reminderDelayHours: z.int().min(1).max(30 * 24).optional().describe('Send one reminder this many hours after an alert, if the product is still sellable and the shopper has not ordered it; unset: no reminders'),
    reserveUnitsMinutes: z
      .int()
      .min(0)
      .max(7 * 24 * 60)
      .optional()
      .describe('When a restock is smaller than the waiting list, hold one unit for this many minutes for each shopper of its first batch, whose alert links a checkout of that unit (Shopify stores only; see docs/dispatch.md). 0 or unset: no holds'),
    waitlistThreshold: z.int().min(1).max(1_000_000).optional().describe("Tell the store's owner when a product or variant has this many shoppers waiting; unset: never"),
    weeklyDigest: z.boolean().optional().describe("Mail the store's owner a weekly digest of sign-ups, sends, clicks, orders and revenue"),
    doubleOptIn: z
      .enum(['auto', 'always', 'never'])
      .optional()
      .describe('Whether a new e-mail subscription waits for the shopper to confirm it by a link (pending until then). auto (default): when the shopper or the store is in the EU/EEA, the UK or Switzerland. SMS always asks for a YES.'),
    country: z.string().regex(/^[A-Z]{2}$/, 'must be a two-letter country code such as DE').optional().describe("The store's country (ISO 3166-1 alpha-2), for doubleOptIn auto"),
    smsQuietHours: quietHoursSchema.optional(),
    timeZone: timeZoneSchema.optional().describe("The store's time zone (IANA), for quiet hours when the shopper's is unknown (default UTC)"),
    // Each channel's switch on the storefront's form (the channel registry's), named after the channel.
    ...storefrontSwitches(),
  })
  .strict();

/** A store's switch for each channel the storefront's form may offer. */
function storefrontSwitches(): Record<ContactChannel, z.ZodOptional<z.ZodBoolean>> {
  return Object.fromEntries(STOREFRONT_OFFERS.map(([channel, offer]) => [channel, z.boolean().optional().describe(offer.setting)])) as Record<ContactChannel, z.ZodOptional<z.ZodBoolean>>;
}

export type StoreSettings = z.infer<typeof storeSettingsSchema>;

/** A store's settings with the service defaults filled in: what dispatch works with. */
export type EffectiveSettings = BaseSettings & StorefrontSwitches;

/** Each channel's switch in force: on, off, or (null) on where the service can send it for the store. */
export type StorefrontSwitches = Record<ContactChannel, boolean | null>;

interface BaseSettings extends BatchPolicy {
  locale: z.infer<typeof localeSchema>;
  senderName: string | undefined;
  template: z.infer<typeof alertTemplateSchema>;
  utm: { source: string; medium: string; campaign: string };
  attributionWindowDays: number;
  /** null: no reminders. */
  reminderDelayHours: number | null;
  /** Minutes a unit is held for each shopper of a restock's first batch; 0: no holds. */
  reserveUnitsMinutes: number;
  /** null: no waitlist notices. */
  waitlistThreshold: number | null;
  weeklyDigest: boolean;
  doubleOptIn: 'auto' | 'always' | 'never';
  country: string | null;
  smsQuietHours: { start: number; end: number };
  timeZone: string;
}

export function effectiveSettings(stored: StoreSettings, defaults: BatchPolicy): EffectiveSettings {
  return {
    batchMultiplier: stored.batchMultiplier ?? defaults.batchMultiplier,
    batchIntervalSeconds: stored.batchIntervalSeconds ?? defaults.batchIntervalSeconds,
    minStock: stored.minStock ?? defaults.minStock,
    frequencyCapMinutes: stored.frequencyCapMinutes ?? defaults.frequencyCapMinutes,
    locale: stored.locale ?? 'en',
    senderName: stored.senderName,
    template: stored.template ?? {},
    utm: { ...DEFAULT_UTM, ...stored.utm },
    attributionWindowDays: stored.attributionWindowDays ?? DEFAULT_ATTRIBUTION_WINDOW_DAYS,
    reminderDelayHours: stored.reminderDelayHours ?? null,
    reserveUnitsMinutes: stored.reserveUnitsMinutes ?? 0,
    waitlistThreshold: stored.waitlistThreshold ?? null,
    weeklyDigest: stored.weeklyDigest ?? false,
    doubleOptIn: stored.doubleOptIn ?? 'auto',
    country: stored.country ?? null,
    smsQuietHours: stored.smsQuietHours ?? { ...DEFAULT_SMS_QUIET_HOURS },
    timeZone: stored.timeZone ?? 'UTC',
    ...switchesInForce(stored),
  };
}

/** Settings as stored; a row written by an older version (or by hand) that fails the schema counts as unset. */
export function parseStoredSettings(json: string): StoreSettings {
  try {
    const parsed = storeSettingsSchema.safeParse(JSON.parse(json));
    return parsed.success ? parsed.data : {};
  } catch {
    return {};
  }
}

/** Each switch as set, else its channel's default. */
function switchesInForce(stored: StoreSettings): StorefrontSwitches {
  return Object.fromEntries(STOREFRONT_OFFERS.map(([channel, offer]) => [channel, stored[channel] ?? offer.byDefault])) as StorefrontSwitches;
}
