import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { ChannelNeeds } from '../channel.ts';
import type { ServiceSettings } from '../core/settings-slice.ts';
import { pushConfig, pushSettings, type PushSettings } from './settings.ts';
import { pushSubscriptionSchema, type PushSubscriptionJson } from './subscription.ts';
import { ChannelDeliveryError, type ChannelDefinition, type ChannelNotification, type ChannelSending, type StoreSending } from '../core/channels.ts';

/** A browser's keys to encrypt its pushes with (RFC 8291), as it handed them over. */
const pushDetails = z.object({ p256dh: z.string().min(1), auth: z.string().min(1) }).strict();

/** Browser push in the channel registry (src/channels.ts): a browser whose permission prompt was the yes, stopped by its own link. */
export const pushChannel = {
  label: 'Browser notifications',
  words: 'by browser push',
  confirmation: 'none',
  optOut: 'link',
  quietHours: false,
  notSetUp: 'browser push is not set up on this service',
  contactPoint: { device: 'browser', startsAs: 'active', details: pushDetails },
  pages: {
    en: { name: 'browser notifications', point: (endpoint) => `Browser notification, a browser (through ${pushHost(endpoint)})`, consent: { 'browser-permission': 'by allowing notifications in the browser' } },
    fr: { name: 'notifications du navigateur', point: (endpoint) => `Notification du navigateur, un navigateur (via ${pushHost(endpoint)})`, consent: { 'browser-permission': 'en autorisant les notifications du navigateur' } },
    de: { name: 'Browser-Benachrichtigungen', point: (endpoint) => `Browser-Benachrichtigung, ein Browser (über ${pushHost(endpoint)})`, consent: { 'browser-permission': 'durch Erlauben der Browser-Benachrichtigungen' } },
    es: { name: 'notificaciones del navegador', point: (endpoint) => `Notificación del navegador, un navegador (a través de ${pushHost(endpoint)})`, consent: { 'browser-permission': 'al permitir las notificaciones del navegador' } },
  },
  // Only the storefront: the subscription is the shopper's own browser's, handed over on the store's page.
  signUp: {
    storefront: (policy) => ({
      push: pushSubscriptionSchema(policy).nullish().describe("This browser's push subscription (PushSubscription.toJSON()), given after the shopper allowed notifications"),
    }),
    contact(body, from) {
      const push = body.push as PushSubscriptionJson | null | undefined;
      if (!push || from !== 'storefront') return undefined;
      return {
        address: push.endpoint,
        addressKey: createHash('sha256').update(push.endpoint).digest('base64url'),
        details: { p256dh: push.keys.p256dh, auth: push.keys.auth },
        consent: { method: 'browser-permission', text: 'allowed notifications from this site when asked by the browser' },
      };
    },
  },
  storefront: {
    setting: 'Offer browser push alerts on the storefront (default true)',
    inForce: 'Offer browser push on the storefront',
    byDefault: true,
    dashboard: { label: 'Offer browser notifications', hint: '“Also notify me in this browser” on the sign-up form.' },
    choice: new URL('./widget-choice.ts', import.meta.url),
  },
  settings: { slice: pushSettings, read: (values: PushSettings, service: ServiceSettings) => pushConfig(values, service.mailFrom) },
  async build(needs: ChannelNeeds) {
    const { buildPush } = await import('./feature.ts');
    return buildPush(needs);
  },
} as const satisfies ChannelDefinition;

/** The push service's host names the browser's maker (fcm.googleapis.com, updates.push.services.mozilla.com). */
function pushHost(endpoint: string): string {
  try {
    return new URL(endpoint).host;
  } catch {
    return '?';
  }
}

export interface PushMessage {
  endpoint: string;
  keys: { p256dh: string; auth: string };
  payload: PushPayload;
  /** How long the push service keeps it for an offline browser. */
  ttlSeconds: number;
}

/** What the service worker shows: a notification that opens `url` when clicked. */
export interface PushPayload {
  title: string;
  body: string;
  url: string;
  icon: string | null;
  /** One notification per tag: a reminder replaces its alert. */
  tag: string;
  /** Stops alerts to this browser, offered as the notification's second button; it covers nothing else. */
  stop: { url: string; label: string };
}

/** `gone`: the push service answered 404 or 410, the browser's subscription is no more. */
export class PushDeliveryError extends ChannelDeliveryError {
  constructor(
    message: string,
    readonly status: number | undefined,
    readonly gone: boolean,
    readonly permanent: boolean,
  ) {
    super(
      message,
      gone ? `the push service says the browser's subscription is gone (${status}); it is removed` : permanent ? `refused by the push service (${status}): ${message}` : undefined,
      gone,
    );
    this.name = 'PushDeliveryError';
  }
}

export interface PushChannel {
  send(message: PushMessage): Promise<void>;
  /** The VAPID public key (base64url), which the widget hands to `pushManager.subscribe`. */
  publicKey(): string;
}

/**
 * Browser push as the dispatch worker sends it: a notification that opens the product through
 * our redirect, titled by the product, from the store, and can stop that browser's alerts.
 */
export function pushChannelSending(push: PushChannel, ttlSeconds: number): ChannelSending {
  const sending: StoreSending = {
    refusal: () => undefined,
    async deliver(notification: ChannelNotification) {
      const { contact, product } = notification;
      await push.send({
        endpoint: contact.address,
        keys: pushDetails.parse(contact.details),
        payload: { title: notification.headline, body: notification.sender, url: notification.clickUrl, icon: product.imageUrl, tag: `restock-${notification.restockId}`, stop: notification.stop },
        ttlSeconds,
      });
      return {};
    },
  };
  return { forStore: async () => sending };
}
