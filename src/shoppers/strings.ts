// Longer than most files on purpose: every word of the shopper's page in four languages, side by side so a missing one shows.
import { CHANNEL_NAMES, CHANNELS, type Channel } from '../channels.ts';
import type { ChannelWords } from '../core/channels.ts';
import type { ContactPointStatus, SubscriptionStatus } from '../core/db/schema.ts';
import { LANGUAGES, type Language } from '../core/languages.ts';


/** One language's words; functions where a value goes inside the sentence. */
export interface Strings {
  pageTitle: string;
  heading: (store: string) => string;
  intro: (email: string) => string;
  none: string;
  listLabel: string;
  product: (id: string) => string;
  status: Record<SubscriptionStatus, string>;
  statusLabel: string;
  channelsLabel: string;
  subscribedLabel: string;
  consentLabel: string;
  consentHow: (method: string) => string;
  consentWords: string;
  consentPage: string;
  confirmedAt: (at: string) => string;
  email: string;
  emailOn: string;
  emailMuted: string;
  /** The channel as named inside a button's sentence (the channel registry's words). */
  channelName: Record<Channel, string>;
  point: Record<ContactPointStatus, string>;
  cancelOne: string;
  turnOff: (channel: string) => string;
  turnOn: (channel: string) => string;
  forProduct: (title: string) => string;
  allHeading: string;
  cancelAll: string;
  turnOffAll: (channel: string) => string;
  dataHeading: string;
  dataIntro: string;
  download: string;
  eraseLink: string;
  eraseTitle: string;
  eraseIntro: (store: string, email: string) => string;
  eraseItems: string[];
  eraseKeep: string;
  eraseButton: string;
  eraseBack: string;
  erasedTitle: string;
  erasedBody: string;
  linkNote: string;
}

/** How consent was given, by its method: the sign-up's own, then each channel's (the registry's words). */
const SIGN_UP_METHODS: Record<Language, Record<string, string>> = {
  en: { 'storefront-form': 'on the store’s product page', 'agent-api': 'through an assistant (API)' },
  fr: { 'storefront-form': 'sur la page produit de la boutique', 'agent-api': 'par un assistant (API)' },
  de: { 'storefront-form': 'auf der Produktseite des Shops', 'agent-api': 'über einen Assistenten (API)' },
  es: { 'storefront-form': 'en la página del producto de la tienda', 'agent-api': 'a través de un asistente (API)' },
};
const METHOD_WORDS = Object.fromEntries(
  LANGUAGES.map((language) => [language, Object.assign({}, SIGN_UP_METHODS[language], ...CHANNEL_NAMES.map((channel) => (CHANNELS[channel].pages[language] as ChannelWords).consent ?? {}))]),
) as Record<Language, Record<string, string>>;

/** Each channel's name in a sentence of the page, in `language`. */
function channelNames(language: Language): Record<Channel, string> {
  return Object.fromEntries(CHANNEL_NAMES.map((channel) => [channel, CHANNELS[channel].pages[language].name])) as Record<Channel, string>;
}

/** A method the table does not know is shown as recorded: the record, not a guess, is what counts. */
const how = (language: Language) => (method: string) => METHOD_WORDS[language][method] ?? method;

const en: Strings = {
  pageTitle: 'Your alerts',
  heading: (store) => `Your alerts at ${store}`,
  intro: (email) => `Everything ${email} waits for at this store. Anyone with this link can change these alerts, so keep it to yourself.`,
  none: 'There are no alerts for this address.',
  listLabel: 'Alerts',
  product: (id) => `Product ${id}`,
  status: {
    pending: 'Waiting for your confirmation',
    active: 'Waiting for the restock',
    notified: 'Back in stock: alert sent',
    unsubscribed: 'Cancelled by you',
    cancelled: 'Cancelled',
    expired: 'Expired: never confirmed',
  },
  statusLabel: 'Status',
  channelsLabel: 'Sent by',
  subscribedLabel: 'Asked for on',
  consentLabel: 'Your consent',
  consentHow: (method) => `Given ${how('en')(method)}`,
  consentWords: 'Words shown',
  consentPage: 'Page',
  confirmedAt: (at) => `confirmed on ${at}`,
  email: 'E-mail',
  emailOn: 'on',
  emailMuted: 'turned off',
  channelName: channelNames('en'),
  point: { pending: 'waiting for your YES', active: 'on', stopped: 'turned off', removed: 'no longer reachable', expired: 'expired: never confirmed' },
  cancelOne: 'Cancel this alert',
  turnOff: (channel) => `Turn ${channel} off`,
  turnOn: (channel) => `Turn ${channel} on`,
  forProduct: (title) => ` for ${title}`,
  allHeading: 'All alerts',
  cancelAll: 'Cancel all alerts',
  turnOffAll: (channel) => `Turn ${channel} off for all alerts`,
  dataHeading: 'Your data',
  dataIntro: 'Download what this service holds about this address at this store, or erase it.',
  download: 'Download my data (JSON)',
  eraseLink: 'Erase my data',
  eraseTitle: 'Erase your data?',
  eraseIntro: (store, email) => `This erases what the alert service holds about ${email} at ${store}:`,
  eraseItems: ['every alert listed on your page, with its consent records', 'your phone numbers and browsers for these alerts', 'the record of alerts sent to you', 'orders of yours the store reported to measure its alerts'],
  eraseKeep: 'It cannot be undone, and this link stops working. A text-message STOP you sent is kept, so you are never texted against your wish.',
  eraseButton: 'Erase my data now',
  eraseBack: 'Back to my alerts',
  erasedTitle: 'Your data is erased',
  erasedBody: 'Nothing more will be sent for these alerts. This link no longer works.',
  linkNote: 'This page needs no account: the link in our messages is the key to it.',
};

const fr: Strings = {
  pageTitle: 'Vos alertes',
  heading: (store) => `Vos alertes chez ${store}`,
  intro: (email) => `Tout ce que ${email} attend dans cette boutique. Toute personne ayant ce lien peut modifier ces alertes : gardez-le pour vous.`,
  none: 'Aucune alerte pour cette adresse.',
  listLabel: 'Alertes',
  product: (id) => `Produit ${id}`,
  status: {
    pending: 'En attente de votre confirmation',
    active: 'En attente du réassort',
    notified: 'De retour en stock : alerte envoyée',
    unsubscribed: 'Annulée par vous',
    cancelled: 'Annulée',
    expired: 'Expirée : jamais confirmée',
  },
  statusLabel: 'État',
  channelsLabel: 'Envoyée par',
  subscribedLabel: 'Demandée le',
  consentLabel: 'Votre consentement',
  consentHow: (method) => `Donné ${how('fr')(method)}`,
  consentWords: 'Texte affiché',
  consentPage: 'Page',
  confirmedAt: (at) => `confirmé le ${at}`,
  email: 'E-mail',
  emailOn: 'activé',
  emailMuted: 'désactivé',
  channelName: channelNames('fr'),
  point: { pending: 'en attente de votre OUI', active: 'activé', stopped: 'désactivé', removed: 'plus joignable', expired: 'expiré : jamais confirmé' },
  cancelOne: 'Annuler cette alerte',
  turnOff: (channel) => `Désactiver : ${channel}`,
  turnOn: (channel) => `Activer : ${channel}`,
  forProduct: (title) => ` pour ${title}`,
  allHeading: 'Toutes les alertes',
  cancelAll: 'Annuler toutes les alertes',
  turnOffAll: (channel) => `Désactiver pour toutes les alertes : ${channel}`,
  dataHeading: 'Vos données',
  dataIntro: 'Téléchargez ce que ce service conserve sur cette adresse dans cette boutique, ou effacez-le.',
  download: 'Télécharger mes données (JSON)',
  eraseLink: 'Effacer mes données',
  eraseTitle: 'Effacer vos données ?',
  eraseIntro: (store, email) => `Ceci efface ce que le service d’alertes conserve sur ${email} chez ${store} :`,
  eraseItems: ['chaque alerte de votre page, avec ses preuves de consentement', 'vos numéros de téléphone et navigateurs pour ces alertes', 'l’historique des alertes envoyées', 'vos commandes signalées par la boutique pour mesurer ses alertes'],
  eraseKeep: 'C’est définitif, et ce lien cessera de fonctionner. Un STOP envoyé par SMS est conservé, pour ne jamais vous écrire contre votre gré.',
  eraseButton: 'Effacer mes données maintenant',
  eraseBack: 'Retour à mes alertes',
  erasedTitle: 'Vos données sont effacées',
  erasedBody: 'Plus rien ne sera envoyé pour ces alertes. Ce lien ne fonctionne plus.',
  linkNote: 'Cette page ne demande aucun compte : le lien de nos messages en est la clé.',
};

const de: Strings = {
  pageTitle: 'Ihre Benachrichtigungen',
  heading: (store) => `Ihre Benachrichtigungen bei ${store}`,
  intro: (email) => `Alles, worauf ${email} in diesem Shop wartet. Wer diesen Link hat, kann diese Benachrichtigungen ändern: Geben Sie ihn nicht weiter.`,
  none: 'Für diese Adresse gibt es keine Benachrichtigungen.',
  listLabel: 'Benachrichtigungen',
  product: (id) => `Produkt ${id}`,
  status: {
    pending: 'Wartet auf Ihre Bestätigung',
    active: 'Wartet auf neuen Bestand',
    notified: 'Wieder vorrätig: Benachrichtigung gesendet',
    unsubscribed: 'Von Ihnen abbestellt',
    cancelled: 'Abbestellt',
    expired: 'Abgelaufen: nie bestätigt',
  },
  statusLabel: 'Status',
  channelsLabel: 'Gesendet per',
  subscribedLabel: 'Angefragt am',
  consentLabel: 'Ihre Einwilligung',
  consentHow: (method) => `Gegeben ${how('de')(method)}`,
  consentWords: 'Angezeigter Text',
  consentPage: 'Seite',
  confirmedAt: (at) => `bestätigt am ${at}`,
  email: 'E-Mail',
  emailOn: 'an',
  emailMuted: 'aus',
  channelName: channelNames('de'),
  point: { pending: 'wartet auf Ihr JA', active: 'an', stopped: 'aus', removed: 'nicht mehr erreichbar', expired: 'abgelaufen: nie bestätigt' },
  cancelOne: 'Diese Benachrichtigung abbestellen',
  turnOff: (channel) => `${channel} ausschalten`,
  turnOn: (channel) => `${channel} einschalten`,
  forProduct: (title) => ` für ${title}`,
  allHeading: 'Alle Benachrichtigungen',
  cancelAll: 'Alle Benachrichtigungen abbestellen',
  turnOffAll: (channel) => `${channel} für alle Benachrichtigungen ausschalten`,
  dataHeading: 'Ihre Daten',
  dataIntro: 'Laden Sie herunter, was dieser Dienst über diese Adresse in diesem Shop speichert, oder löschen Sie es.',
  download: 'Meine Daten herunterladen (JSON)',
  eraseLink: 'Meine Daten löschen',
  eraseTitle: 'Ihre Daten löschen?',
  eraseIntro: (store, email) => `Dies löscht, was der Benachrichtigungsdienst über ${email} bei ${store} speichert:`,
  eraseItems: ['jede Benachrichtigung Ihrer Seite mit ihren Einwilligungsnachweisen', 'Ihre Telefonnummern und Browser für diese Benachrichtigungen', 'die Liste der an Sie gesendeten Benachrichtigungen', 'Ihre Bestellungen, die der Shop zur Messung seiner Benachrichtigungen gemeldet hat'],
  eraseKeep: 'Das lässt sich nicht rückgängig machen, und dieser Link funktioniert danach nicht mehr. Ein per SMS gesendetes STOP bleibt gespeichert, damit Sie nie gegen Ihren Willen SMS erhalten.',
  eraseButton: 'Meine Daten jetzt löschen',
  eraseBack: 'Zurück zu meinen Benachrichtigungen',
  erasedTitle: 'Ihre Daten sind gelöscht',
  erasedBody: 'Für diese Benachrichtigungen wird nichts mehr gesendet. Dieser Link funktioniert nicht mehr.',
  linkNote: 'Diese Seite braucht kein Konto: Der Link in unseren Nachrichten ist der Schlüssel.',
};

const es: Strings = {
  pageTitle: 'Tus alertas',
  heading: (store) => `Tus alertas en ${store}`,
  intro: (email) => `Todo lo que ${email} espera en esta tienda. Quien tenga este enlace puede cambiar estas alertas: no lo compartas.`,
  none: 'No hay alertas para esta dirección.',
  listLabel: 'Alertas',
  product: (id) => `Producto ${id}`,
  status: {
    pending: 'Pendiente de tu confirmación',
    active: 'Esperando la reposición',
    notified: 'De nuevo en stock: alerta enviada',
    unsubscribed: 'Cancelada por ti',
    cancelled: 'Cancelada',
    expired: 'Caducada: nunca confirmada',
  },
  statusLabel: 'Estado',
  channelsLabel: 'Enviada por',
  subscribedLabel: 'Pedida el',
  consentLabel: 'Tu consentimiento',
  consentHow: (method) => `Dado ${how('es')(method)}`,
  consentWords: 'Texto mostrado',
  consentPage: 'Página',
  confirmedAt: (at) => `confirmado el ${at}`,
  email: 'Correo',
  emailOn: 'activado',
  emailMuted: 'desactivado',
  channelName: channelNames('es'),
  point: { pending: 'esperando tu SÍ', active: 'activado', stopped: 'desactivado', removed: 'ya no se puede contactar', expired: 'caducado: nunca confirmado' },
  cancelOne: 'Cancelar esta alerta',
  turnOff: (channel) => `Desactivar: ${channel}`,
  turnOn: (channel) => `Activar: ${channel}`,
  forProduct: (title) => ` de ${title}`,
  allHeading: 'Todas las alertas',
  cancelAll: 'Cancelar todas las alertas',
  turnOffAll: (channel) => `Desactivar en todas las alertas: ${channel}`,
  dataHeading: 'Tus datos',
  dataIntro: 'Descarga lo que este servicio guarda sobre esta dirección en esta tienda, o bórralo.',
  download: 'Descargar mis datos (JSON)',
  eraseLink: 'Borrar mis datos',
  eraseTitle: '¿Borrar tus datos?',
  eraseIntro: (store, email) => `Esto borra lo que el servicio de alertas guarda sobre ${email} en ${store}:`,
  eraseItems: ['cada alerta de tu página, con sus registros de consentimiento', 'tus números de teléfono y navegadores para estas alertas', 'el registro de alertas enviadas', 'tus pedidos que la tienda comunicó para medir sus alertas'],
  eraseKeep: 'No se puede deshacer, y este enlace dejará de funcionar. Un STOP enviado por SMS se conserva, para no escribirte nunca contra tu voluntad.',
  eraseButton: 'Borrar mis datos ahora',
  eraseBack: 'Volver a mis alertas',
  erasedTitle: 'Tus datos están borrados',
  erasedBody: 'No se enviará nada más por estas alertas. Este enlace ya no funciona.',
  linkNote: 'Esta página no necesita cuenta: el enlace de nuestros mensajes es la llave.',
};

export const STRINGS: Record<Language, Strings> = { en, fr, de, es };

/** A tag such as `fr-CA` or `DE` as one of ours, else undefined. */
export function languageOf(tag: string | null | undefined): Language | undefined {
  const primary = tag?.trim().split(/[-_]/)[0]?.toLowerCase();
  return LANGUAGES.find((language) => language === primary);
}

/** The first of ours the browser asks for, by RFC 9110 quality (a `q=0` language is refused, not wanted). */
export function languageFromAcceptLanguage(header: string | undefined): Language | undefined {
  if (!header) return undefined;
  const ranked = header
    .split(',')
    .map((part, index) => {
      const [tag = '', ...params] = part.split(';').map((piece) => piece.trim());
      const q = params.find((param) => param.startsWith('q='));
      const quality = q === undefined ? 1 : Number(q.slice(2));
      return { tag, quality: Number.isFinite(quality) ? quality : 0, index };
    })
    .filter((entry) => entry.quality > 0)
    .sort((a, b) => b.quality - a.quality || a.index - b.index);
  for (const entry of ranked) {
    const language = languageOf(entry.tag);
    if (language) return language;
  }
  return undefined;
}

/** A date as the shopper reads it; UTC, since the page does not know the shopper's zone. */
export function formatDate(language: Language, iso: string): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return new Intl.DateTimeFormat(language, { dateStyle: 'long', timeZone: 'UTC' }).format(date);
}
