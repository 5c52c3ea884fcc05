import { createHash } from 'node:crypto';

/**
 * What happened in a store that its own tools may want to hear about. Features announce events
 * through an `EventSink`; the outgoing-webhooks feature is the sink, delivering each event to
 * the endpoints the store registered for its type.
 */
export const storeEventTypes = ['subscription.created', 'alert.sent', 'alert.clicked', 'order.attributed', 'waitlist.threshold'] as const;

export type StoreEventType = (typeof storeEventTypes)[number];

export interface StoreEvent {
  storeDomain: string;
  type: StoreEventType;
  /**
   * Stable per event (the alert's id for `alert.sent`, say): announcing one event twice, as a
   * retried transaction may, delivers it once. It becomes the Standard Webhooks `webhook-id`.
   */
  id: string;
  /** When it happened (ISO 8601). */
  occurredAt: string;
  /** The event's body: plain JSON, no secrets; addresses only where the event is about a shopper. */
  data: Record<string, unknown>;
}

export interface EventSink {
  /**
   * Queues the events durably for every endpoint of their store that takes their type; resolves
   * once stored. Several at once (a settled group of alerts) read each store's endpoints once.
   */
  announce(...events: StoreEvent[]): Promise<void>;
}

/**
 * A stable event id from the event's natural key (a type and the ids it is about): the same
 * event announced twice gets the same id. Hashed, because webhook ids must be plain printable
 * ASCII without dots, and store domains and times carry dots.
 */
export function eventId(type: StoreEventType, ...key: string[]): string {
  return `evt_${createHash('sha256').update([type, ...key].join('\n')).digest('base64url').slice(0, 32)}`;
}
