import type { Language } from '../core/languages.ts';
/**
 * What a text costs and says. Carriers bill per segment: a GSM-7 text of up to 160 characters
 * is one (153 each once split, the rest of each 140-byte part carries the header that joins
 * them); a single character outside GSM-7 turns the whole text into UCS-2, 70 characters, then
 * 67 per part. Characters of GSM-7's extension table take two septets. A part never splits an
 * escaped character or a surrogate pair, so a long text may need one part more than its length
 * divided by 153 or 67 suggests. (3GPP TS 23.038; Twilio's "How long can a message be?".)
 *
 * The alerts are written to fit one segment whenever the language and the names allow: only
 * the title gives way, never the link, and the opt-out wording is always there.
 */

export type SmsLocale = Language;
export type SmsEncoding = 'GSM-7' | 'UCS-2';

export interface SegmentCount {
  encoding: SmsEncoding;
  /** Septets (GSM-7) or UTF-16 code units (UCS-2) the text takes. */
  units: number;
  segments: number;
}

const GSM_BASIC = new Set(
  '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà',
);
/** Sent as an escape and the character: two septets each. */
const GSM_EXTENSION = new Set('\f^{}\\[~]|€');

const LIMITS = {
  'GSM-7': { single: 160, part: 153 },
  'UCS-2': { single: 70, part: 67 },
} as const;

/** How many segments a text is sent as, in the encoding Twilio picks for it (the most compact one). */
export function countSegments(text: string): SegmentCount {
  const gsm = [...text].every((char) => GSM_BASIC.has(char) || GSM_EXTENSION.has(char));
  const encoding: SmsEncoding = gsm ? 'GSM-7' : 'UCS-2';
  const widths = gsm ? [...text].map((char) => (GSM_EXTENSION.has(char) ? 2 : 1)) : [...text].map((char) => char.length);
  const units = widths.reduce((sum, width) => sum + width, 0);
  const limit = LIMITS[encoding];
  if (units <= limit.single) return { encoding, units, segments: 1 };
  return { encoding, units, segments: partsOf(widths, limit.part) };
}

/** Parts filled in order, each character whole in one part. */
function partsOf(widths: number[], capacity: number): number {
  let parts = 1;
  let used = 0;
  for (const width of widths) {
    if (used + width > capacity) {
      parts++;
      used = 0;
    }
    used += width;
  }
  return parts;
}

export function isGsm7(text: string): boolean {
  return countSegments(text).encoding === 'GSM-7';
}

export interface NotificationTextInput {
  /** The store's name as the shopper knows it. */
  shop: string;
  productTitle: string;
  variantTitle?: string | null;
  /** Our click redirect to the product; never shortened further. */
  link: string;
  locale: SmsLocale;
  kind: 'alert' | 'reminder';
}

type Render = (title: string) => string;

const ALERT: Record<SmsLocale, Record<NotificationTextInput['kind'], (shop: string, link: string) => Render>> = {
  en: {
    alert: (shop, link) => (title) => `${shop}: ${title} is back in stock. ${link} STOP to opt out`,
    reminder: (shop, link) => (title) => `${shop}: ${title} is still available. ${link} STOP to opt out`,
  },
  fr: {
    alert: (shop, link) => (title) => `${shop} : ${title} est de retour en stock. ${link} STOP pour vous désabonner`,
    reminder: (shop, link) => (title) => `${shop} : ${title} est toujours disponible. ${link} STOP pour vous désabonner`,
  },
  de: {
    alert: (shop, link) => (title) => `${shop}: ${title} ist wieder verfügbar. ${link} STOP zum Abmelden`,
    reminder: (shop, link) => (title) => `${shop}: ${title} ist noch verfügbar. ${link} STOP zum Abmelden`,
  },
  es: {
    alert: (shop, link) => (title) => `${shop}: ¡${title} vuelve a estar disponible! ${link} STOP para darte de baja`,
    reminder: (shop, link) => (title) => `${shop}: ${title} sigue disponible. ${link} STOP para darte de baja`,
  },
};

/** Shopify names a product's only variant "Default Title"; it says nothing to a shopper. */
const MEANINGLESS_VARIANT = /^default title$/i;

/** The alert or reminder text: one segment unless the names need more than the encoding allows. */
export function composeNotificationText(input: NotificationTextInput): string {
  const variant = input.variantTitle?.trim();
  const title = variant && !MEANINGLESS_VARIANT.test(variant) ? `${input.productTitle.trim()} - ${variant}` : input.productTitle.trim();
  return fitTitle(ALERT[input.locale][input.kind](shortShop(input.shop), input.link), title);
}

const CONFIRMATION: Record<SmsLocale, { render: (shop: string) => Render; noTitle: string }> = {
  en: {
    render: (shop) => (title) => `${shop}: reply YES to get a text when ${title} is back in stock. STOP to opt out`,
    noTitle: 'your item',
  },
  fr: {
    render: (shop) => (title) => `${shop} : répondez YES pour recevoir un SMS quand ${title} sera de retour en stock. STOP pour vous désabonner`,
    noTitle: 'votre article',
  },
  de: {
    render: (shop) => (title) => `${shop}: Antworten Sie YES, um eine SMS zu erhalten, wenn ${title} wieder verfügbar ist. STOP zum Abmelden`,
    noTitle: 'Ihr Artikel',
  },
  es: {
    render: (shop) => (title) => `${shop}: responde YES para recibir un SMS cuando ${title} vuelva a estar disponible. STOP para darte de baja`,
    noTitle: 'tu producto',
  },
};

/** The double opt-in text a new SMS subscription is sent: nothing else is texted until the shopper replies YES. */
export function composeConfirmationText(input: { shop: string; productTitle?: string | null; locale: SmsLocale }): string {
  const { render, noTitle } = CONFIRMATION[input.locale];
  return fitTitle(render(shortShop(input.shop)), input.productTitle?.trim() || noTitle);
}

const CONFIRMED: Record<SmsLocale, (shop: string) => string> = {
  en: (shop) => `${shop}: you're subscribed. We'll text you when your item is back in stock. STOP to opt out, HELP for help`,
  fr: (shop) => `${shop} : c'est confirmé. Nous vous enverrons un SMS dès le retour en stock. STOP pour vous désabonner`,
  de: (shop) => `${shop}: Bestätigt. Wir schicken Ihnen eine SMS, sobald der Artikel wieder verfügbar ist. STOP zum Abmelden`,
  es: (shop) => `${shop}: confirmado. Te enviaremos un SMS cuando vuelva a estar disponible. STOP para darte de baja`,
};

/** The answer to YES once it confirmed at least one subscription. */
export function composeConfirmedText(input: { shop: string; locale: SmsLocale }): string {
  return fitTitle((shop) => CONFIRMED[input.locale](shop), input.shop.trim());
}

const HELP: Record<SmsLocale, (sender: string) => string> = {
  en: (sender) => `${sender}: back-in-stock texts for items you asked for. Reply STOP to opt out, START to opt back in. Msg&data rates may apply`,
  fr: (sender) => `${sender} : SMS de retour en stock des articles demandés. Répondez STOP pour vous désabonner, START pour vous réabonner`,
  de: (sender) => `${sender}: SMS, wenn gewünschte Artikel wieder verfügbar sind. Antworten Sie STOP zum Abmelden, START zum erneuten Anmelden`,
  es: (sender) => `${sender}: SMS cuando vuelven los productos que pediste. Responde STOP para darte de baja, START para volver a suscribirte`,
};

/** The answer to HELP or INFO: who texts, why, and the two keywords that matter. */
export function helpText(input: { sender: string; locale: SmsLocale }): string {
  return fitTitle((sender) => HELP[input.locale](sender), input.sender.trim());
}

/** A store name longer than this is cut: it would crowd out the product. */
const SHOP_GRAPHEMES = 30;
/** A title is cut no shorter than this to keep to fewer segments; below it a text takes one part more instead. */
const TITLE_GRAPHEMES_KEPT = 16;
/** Beyond this many parts, carriers reassemble unreliably; Twilio itself allows 1,600 characters. */
const MOST_SEGMENTS = 10;

function shortShop(shop: string): string {
  return truncated(shop.trim(), SHOP_GRAPHEMES);
}

/**
 * The text with the whole title when it fits in the fewest segments the fixed words allow, else
 * with the title cut (at a grapheme, with an ellipsis) to fit them; a title is never cut below
 * TITLE_GRAPHEMES_KEPT to save a segment.
 */
function fitTitle(render: Render, title: string): string {
  const graphemes = graphemesOf(title);
  for (let segments = 1; segments <= MOST_SEGMENTS; segments++) {
    const fits = (kept: number) => countSegments(render(cut(graphemes, kept, render))).segments <= segments;
    if (fits(graphemes.length)) return render(title);
    const floor = Math.min(graphemes.length, TITLE_GRAPHEMES_KEPT);
    if (!fits(floor)) continue;
    let low = floor;
    let high = graphemes.length;
    while (high - low > 1) {
      const middle = (low + high) >> 1;
      if (fits(middle)) low = middle;
      else high = middle;
    }
    return render(cut(graphemes, low, render));
  }
  return render(cut(graphemes, Math.min(graphemes.length, TITLE_GRAPHEMES_KEPT), render));
}

/**
 * The first `kept` graphemes with an ellipsis: "..." when the text stays GSM-7 (where "…" would
 * turn it into UCS-2 and cost more than it saves), "…" when it is UCS-2 anyway.
 */
function cut(graphemes: string[], kept: number, render: Render): string {
  if (kept >= graphemes.length) return graphemes.join('');
  const head = graphemes.slice(0, kept).join('').trimEnd();
  return isGsm7(render(head)) ? `${head}...` : `${head}…`;
}

function truncated(text: string, most: number): string {
  const graphemes = graphemesOf(text);
  if (graphemes.length <= most) return text;
  const head = graphemes.slice(0, most - 1).join('').trimEnd();
  return isGsm7(head) ? `${graphemes.slice(0, most - 3).join('').trimEnd()}...` : `${head}…`;
}

const graphemeSegmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/** User-perceived characters: cutting inside one would leave half an emoji or a lone accent. */
function graphemesOf(text: string): string[] {
  return Array.from(graphemeSegmenter.segment(text), (part) => part.segment);
}
