import type { NotificationKind } from '../core/db/schema.ts';
import type { EffectiveSettings } from '../stores/schemas.ts';

export interface NotificationContent {
  shop: string;
  productTitle: string;
  variantTitle: string | null;
  productUrl: string | null;
  imageUrl: string | null;
  unsubscribeUrl: string;
  /** The shopper's page: every alert of the address at the store, its channels, its data. */
  manageUrl: string;
  email: string;
  /** When the unit held for the shopper is let go, written for them; null or absent: no unit held. */
  reservedUntil?: string | null;
}

interface Strings {
  subject: string;
  intro: string;
  cta: string;
  why: string;
  unsubscribe: string;
  manage: string;
}

/** The alert's words when a unit is held for the shopper: the product link then checks that unit out. */
interface ReservedStrings {
  reserved: string;
  cta: string;
}

const RESERVED_STRINGS: Record<EffectiveSettings['locale'], ReservedStrings> = {
  en: { reserved: 'One is reserved for you until {{reserved_until}}. After that it goes to the next shopper in line.', cta: 'Check out your reserved item' },
  fr: { reserved: 'Un exemplaire vous est réservé jusqu’au {{reserved_until}}. Ensuite, il ira à la personne suivante sur la liste.', cta: 'Acheter l’article réservé' },
  de: { reserved: 'Ein Exemplar ist bis {{reserved_until}} für Sie reserviert. Danach geht es an die nächste Person auf der Liste.', cta: 'Reservierten Artikel kaufen' },
  es: { reserved: 'Tienes una unidad reservada hasta el {{reserved_until}}. Después pasará a la siguiente persona de la lista.', cta: 'Comprar el artículo reservado' },
};

/** The built-in alert wording per locale; a store's own template replaces any part. */
const STRINGS: Record<EffectiveSettings['locale'], Strings> = {
  en: {
    subject: '{{product_title}} is back in stock',
    intro: 'Good news: {{product_title}}{{variant_suffix}} is back in stock at {{shop}}.',
    cta: 'Shop now',
    why: 'You asked to be told when it was available again. This is the only alert you will get for it.',
    unsubscribe: 'Unsubscribe',
    manage: 'Manage your alerts',
  },
  fr: {
    subject: '{{product_title}} est de nouveau en stock',
    intro: 'Bonne nouvelle : {{product_title}}{{variant_suffix}} est de nouveau en stock chez {{shop}}.',
    cta: 'Voir le produit',
    why: 'Vous avez demandé à être prévenu de son retour. Vous ne recevrez que cette alerte pour ce produit.',
    unsubscribe: 'Se désabonner',
    manage: 'Gérer vos alertes',
  },
  de: {
    subject: '{{product_title}} ist wieder auf Lager',
    intro: 'Gute Nachricht: {{product_title}}{{variant_suffix}} ist bei {{shop}} wieder auf Lager.',
    cta: 'Jetzt ansehen',
    why: 'Sie wollten benachrichtigt werden, sobald der Artikel wieder verfügbar ist. Dies ist die einzige Benachrichtigung dazu.',
    unsubscribe: 'Abmelden',
    manage: 'Benachrichtigungen verwalten',
  },
  es: {
    subject: '{{product_title}} vuelve a estar disponible',
    intro: 'Buenas noticias: {{product_title}}{{variant_suffix}} vuelve a estar disponible en {{shop}}.',
    cta: 'Comprar ahora',
    why: 'Pediste que te avisáramos cuando volviera a estar disponible. Es el único aviso que recibirás para este producto.',
    unsubscribe: 'Darse de baja',
    manage: 'Gestionar tus avisos',
  },
};

/** The reminder's wording per locale: built in, whatever the store's own alert template (it is written for the first alert). */
const REMINDER_STRINGS: Record<EffectiveSettings['locale'], Strings> = {
  en: {
    subject: 'Still in stock: {{product_title}}',
    intro: '{{product_title}}{{variant_suffix}} is still in stock at {{shop}}, but it may not stay long.',
    cta: 'Shop now',
    why: 'We told you when it came back. This is the only reminder you will get for it.',
    unsubscribe: 'Unsubscribe',
    manage: 'Manage your alerts',
  },
  fr: {
    subject: 'Toujours en stock : {{product_title}}',
    intro: '{{product_title}}{{variant_suffix}} est toujours en stock chez {{shop}}, mais pas pour longtemps peut-être.',
    cta: 'Voir le produit',
    why: 'Nous vous avons prévenu de son retour. Ceci est le seul rappel que vous recevrez.',
    unsubscribe: 'Se désabonner',
    manage: 'Gérer vos alertes',
  },
  de: {
    subject: 'Noch auf Lager: {{product_title}}',
    intro: '{{product_title}}{{variant_suffix}} ist bei {{shop}} noch auf Lager, vielleicht nicht mehr lange.',
    cta: 'Jetzt ansehen',
    why: 'Wir haben Sie benachrichtigt, als der Artikel zurück war. Dies ist die einzige Erinnerung dazu.',
    unsubscribe: 'Abmelden',
    manage: 'Benachrichtigungen verwalten',
  },
  es: {
    subject: 'Todavía disponible: {{product_title}}',
    intro: '{{product_title}}{{variant_suffix}} sigue disponible en {{shop}}, pero puede agotarse pronto.',
    cta: 'Comprar ahora',
    why: 'Te avisamos cuando volvió. Este es el único recordatorio que recibirás.',
    unsubscribe: 'Darse de baja',
    manage: 'Gestionar tus avisos',
  },
};

const PLACEHOLDER = /\{\{\s*([a-z_]+)\s*\}\}/g;

/** Fills every placeholder `values` has; any other stays as written. */
function fill(template: string, values: Readonly<Record<string, string>>, escape: (text: string) => string): string {
  return template.replace(PLACEHOLDER, (whole, name: string) => (Object.hasOwn(values, name) ? escape(values[name]!) : whole));
}

const HTML_ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ENTITIES[c]!);
}

/** Subject lines are one header line: no line breaks from a product title. */
function oneLine(text: string): string {
  return text.replace(/[\r\n]+/g, ' ').trim();
}

const asIs = (text: string) => text;

/** A push notification's second button: it stops alerts to that browser, and covers nothing else. */
const STOP_LABELS: Record<EffectiveSettings['locale'], string> = {
  en: 'Stop alerts in this browser',
  fr: 'Arrêter les alertes dans ce navigateur',
  de: 'Benachrichtigungen in diesem Browser beenden',
  es: 'Dejar de recibir avisos en este navegador',
};

export function stopLabel(locale: EffectiveSettings['locale']): string {
  return STOP_LABELS[locale];
}

/**
 * The built-in subject line alone, in the alert's language: a push notification's title. It names
 * the product and nothing else, so no link of the e-mail's can reach a browser through it.
 */
export function notificationTitle(product: Pick<NotificationContent, 'shop' | 'productTitle' | 'variantTitle'>, locale: EffectiveSettings['locale'], kind: NotificationKind = 'alert'): string {
  const strings = (kind === 'reminder' ? REMINDER_STRINGS : STRINGS)[locale];
  return oneLine(fill(strings.subject, productValues(product), asIs));
}

/** The placeholders that name the product and the store. */
function productValues(product: Pick<NotificationContent, 'shop' | 'productTitle' | 'variantTitle'>): Record<string, string> {
  return {
    shop: product.shop,
    product_title: product.productTitle,
    variant_title: product.variantTitle ?? '',
    variant_suffix: product.variantTitle ? ` (${product.variantTitle})` : '',
  };
}

/** What an alert says of the product and the store: the same in every message of a restock. */
export type NotificationProduct = Pick<NotificationContent, 'shop' | 'productTitle' | 'variantTitle' | 'imageUrl'>;

/** What differs from one shopper of a restock to the next. */
export type NotificationRecipient = Pick<NotificationContent, 'productUrl' | 'unsubscribeUrl' | 'manageUrl' | 'email' | 'reservedUntil'>;

export type RenderedNotification = { subject: string; text: string; html: string };

/** Renders one shopper's alert from a template compiled once for the product, language and kind. */
export type NotificationRenderer = (recipient: NotificationRecipient) => RenderedNotification;

/** The placeholders whose value is the shopper's own; every other one is filled when the template is compiled. */
const RECIPIENT_PLACEHOLDERS = ['product_url', 'unsubscribe_url', 'manage_url', 'email', 'reserved_until'] as const;
type RecipientPlaceholder = (typeof RECIPIENT_PLACEHOLDERS)[number];

function recipientValue(name: RecipientPlaceholder, recipient: NotificationRecipient, shop: string): string {
  switch (name) {
    case 'product_url':
      return recipient.productUrl ?? `https://${shop}`;
    case 'unsubscribe_url':
      return recipient.unsubscribeUrl;
    case 'manage_url':
      return recipient.manageUrl;
    case 'email':
      return recipient.email;
    case 'reserved_until':
      return recipient.reservedUntil ?? '';
  }
}

/**
 * A template with the restock's own values already in: its fixed text, with the shopper's
 * placeholders between the pieces (`fixed` has one piece more than `names`). A fan-out renders
 * one template for thousands of shoppers, so only their links and address are filled per message.
 */
interface CompiledTemplate {
  fixed: string[];
  names: RecipientPlaceholder[];
  escape: (text: string) => string;
}

/**
 * Splits a template at its placeholders, filling those of the product and the store now. A
 * name that is neither (a typo in a store's template) stays as written, as does anything that
 * only looks like a placeholder. Values are never read as templates themselves.
 */
function compileTemplate(template: string, shared: Readonly<Record<string, string>>, escape: (text: string) => string): CompiledTemplate {
  const fixed: string[] = [];
  const names: RecipientPlaceholder[] = [];
  let piece = '';
  let from = 0;
  for (const match of template.matchAll(PLACEHOLDER)) {
    piece += template.slice(from, match.index);
    from = match.index + match[0].length;
    const name = match[1]!;
    if (Object.hasOwn(shared, name)) piece += escape(shared[name]!);
    else if ((RECIPIENT_PLACEHOLDERS as readonly string[]).includes(name)) {
      fixed.push(piece);
      names.push(name as RecipientPlaceholder);
      piece = '';
    } else piece += match[0];
  }
  fixed.push(piece + template.slice(from));
  return { fixed, names, escape };
}

function fillCompiled(compiled: CompiledTemplate, recipient: NotificationRecipient, shop: string): string {
  const { fixed, names, escape } = compiled;
  let out = fixed[0]!;
  for (let i = 0; i < names.length; i++) out += escape(recipientValue(names[i]!, recipient, shop)) + fixed[i + 1]!;
  return out;
}

/**
 * The alert e-mail (or its reminder) of one product, language and kind, compiled once: subject,
 * plain text and HTML, in the store's locale or its own template. `reserved`: the alert says a
 * unit is held for the shopper until their `reservedUntil`.
 */
export function notificationRenderer(
  product: NotificationProduct,
  settings: Pick<EffectiveSettings, 'locale' | 'template'>,
  kind: NotificationKind = 'alert',
  reserved = false,
): NotificationRenderer {
  const strings = stringsFor(settings.locale, kind, reserved);
  const shared: Record<string, string> = { ...productValues(product), image_url: product.imageUrl ?? '' };
  const own = kind === 'reminder' ? {} : settings.template;
  const subject = compileTemplate(own.subject ?? strings.subject, shared, asIs);
  const text = compileTemplate(own.text ?? defaultText(strings), shared, asIs);
  const html = compileTemplate(own.html ?? defaultHtml(strings, product.imageUrl !== null), shared, escapeHtml);
  // Most subjects name only the product: one string for every message.
  const fixedSubject = subject.names.length === 0 ? oneLine(subject.fixed[0]!) : undefined;
  const shop = product.shop;
  return (recipient) => ({
    subject: fixedSubject ?? oneLine(fillCompiled(subject, recipient, shop)),
    text: fillCompiled(text, recipient, shop),
    html: fillCompiled(html, recipient, shop),
  });
}

/**
 * The alert e-mail (or its reminder) of one shopper, every placeholder filled in one pass: the
 * definition `notificationRenderer` is held to (test/dispatch-messages.test.ts checks the two
 * agree for any template and values), and the naive path of the fan-out bench's baseline. The
 * worker itself renders through `notificationRenderer`.
 */
export function renderNotification(content: NotificationContent, settings: Pick<EffectiveSettings, 'locale' | 'template'>, kind: NotificationKind = 'alert'): RenderedNotification {
  const strings = stringsFor(settings.locale, kind, Boolean(content.reservedUntil));
  const values: Record<string, string> = {
    ...productValues(content),
    reserved_until: content.reservedUntil ?? '',
    product_url: content.productUrl ?? `https://${content.shop}`,
    image_url: content.imageUrl ?? '',
    unsubscribe_url: content.unsubscribeUrl,
    manage_url: content.manageUrl,
    email: content.email,
  };
  const own = kind === 'reminder' ? {} : settings.template;
  const subject = oneLine(fill(own.subject ?? strings.subject, values, asIs));
  const text = fill(own.text ?? defaultText(strings), values, asIs);
  const html = fill(own.html ?? defaultHtml(strings, content.imageUrl !== null), values, escapeHtml);
  return { subject, text, html };
}

/** The built-in words of an alert or reminder, with the held unit's when one is held for the shopper. */
function stringsFor(locale: EffectiveSettings['locale'], kind: NotificationKind, reserved: boolean): Strings {
  const base = (kind === 'reminder' ? REMINDER_STRINGS : STRINGS)[locale];
  const held = kind === 'alert' && reserved ? RESERVED_STRINGS[locale] : undefined;
  return held ? { ...base, intro: `${base.intro} ${held.reserved}`, cta: held.cta } : base;
}

function defaultText(strings: Strings): string {
  return [strings.intro, '', `${strings.cta}: {{product_url}}`, '', strings.why, `${strings.unsubscribe}: {{unsubscribe_url}}`, `${strings.manage}: {{manage_url}}`, ''].join('\n');
}

function defaultHtml(strings: Strings, withImage: boolean): string {
  const image = withImage ? '<p><img src="{{image_url}}" alt="{{product_title}}" width="320" style="max-width:100%;height:auto"></p>' : '';
  return `<!doctype html><html><body style="font-family:system-ui,sans-serif;color:#1a1a1a;max-width:560px;margin:auto">
<p>${strings.intro}</p>
${image}
<p><a href="{{product_url}}" style="display:inline-block;padding:10px 18px;background:#1a1a1a;color:#fff;text-decoration:none;border-radius:4px">${strings.cta}</a></p>
<p style="color:#666;font-size:13px">${strings.why} <a href="{{unsubscribe_url}}" style="color:#666">${strings.unsubscribe}</a> · <a href="{{manage_url}}" style="color:#666">${strings.manage}</a></p>
</body></html>`;
}
