import { ChannelDeliveryError, type ChannelNotification, type ChannelSending, type ContactDetails, type StoreSending } from '../core/channels.ts';

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
        keys: contact.details as ContactDetails<'push'>,
        payload: { title: notification.headline, body: notification.sender, url: notification.clickUrl, icon: product.imageUrl, tag: `restock-${notification.restockId}`, stop: notification.stop },
        ttlSeconds,
      });
      return {};
    },
  };
  return { forStore: async () => sending };
}
