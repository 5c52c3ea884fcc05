import type { EffectiveSettings } from '../stores/schemas.ts';

/**
 * Where a shopper's e-mail signup should be confirmed before anything is sent: the EU and EEA
 * (GDPR's burden of proof of consent, and Germany's courts requiring double opt-in for
 * marketing mail), the United Kingdom and Switzerland, whose rules follow the same line.
 */
const CONFIRMING_COUNTRIES = new Set([
  'AT', 'BE', 'BG', 'HR', 'CY', 'CZ', 'DK', 'EE', 'FI', 'FR', 'DE', 'GR', 'HU', 'IE', 'IT', 'LV', 'LT', 'LU', 'MT', 'NL', 'PL', 'PT', 'RO', 'SK', 'SI', 'ES', 'SE',
  'IS', 'LI', 'NO',
  'GB', 'CH',
]);

/** Whether a new e-mail subscription waits for the shopper's confirmation (double opt-in). */
export function requiresConfirmation(settings: Pick<EffectiveSettings, 'doubleOptIn' | 'country'>, shopperCountry: string | null | undefined): boolean {
  if (settings.doubleOptIn === 'always') return true;
  if (settings.doubleOptIn === 'never') return false;
  return CONFIRMING_COUNTRIES.has(settings.country ?? '') || CONFIRMING_COUNTRIES.has(shopperCountry ?? '');
}

export const CONFIRMATION_STRINGS = {
  en: { subject: (shop: string) => `Confirm your back-in-stock alert from ${shop}`, intro: (shop: string, product: string) => `You asked ${shop} to tell you when ${product} is back in stock. Confirm it's you, and we'll write once, when it is:`, ignore: 'If you did not ask, ignore this message: nothing will be sent.', manage: 'Your alerts at this store:' },
  fr: { subject: (shop: string) => `Confirmez votre alerte de retour en stock de ${shop}`, intro: (shop: string, product: string) => `Vous avez demandé à ${shop} de vous prévenir quand ${product} sera de retour. Confirmez que c'est bien vous, et nous vous écrirons une fois, à ce moment-là :`, ignore: "Si ce n'est pas vous, ignorez ce message : rien ne sera envoyé.", manage: 'Vos alertes dans cette boutique :' },
  de: { subject: (shop: string) => `Bestätigen Sie Ihre Benachrichtigung von ${shop}`, intro: (shop: string, product: string) => `Sie möchten von ${shop} erfahren, wann ${product} wieder vorrätig ist. Bestätigen Sie, dass Sie es sind, dann schreiben wir Ihnen einmal, sobald es soweit ist:`, ignore: 'Wenn Sie das nicht waren, ignorieren Sie diese Nachricht: Es wird nichts gesendet.', manage: 'Ihre Benachrichtigungen in diesem Shop:' },
  es: { subject: (shop: string) => `Confirma tu aviso de reposición de ${shop}`, intro: (shop: string, product: string) => `Pediste a ${shop} que te avise cuando ${product} vuelva a estar disponible. Confirma que eres tú y te escribiremos una vez, cuando lo esté:`, ignore: 'Si no fuiste tú, ignora este mensaje: no se enviará nada.', manage: 'Tus avisos en esta tienda:' },
} as const;
