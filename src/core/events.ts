import { createHash } from 'node:crypto';
import type { ChangeBus } from './changes/bus.ts';
import { alertNewsKey, SUBSCRIPTION_NEWS, subscriptionNewsKey } from './changes/topics.ts';

/**
 * What happened in a store that its own tools may want to hear about. Features announce events
 * through an `EventSink`; the outgoing-webhooks feature is the sink, delivering each event to
 * the endpoints the store registered for its type.
 */
export const storeEventTypes = ['subscription.created', 'alert.sent', 'alert.clicked', 'order.attributed', 'waitlist.threshold', 'product.restocked'] as const;

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
 * One sink of several (the outgoing webhooks, a store's integrations), told each announcement in
 * turn: the kernel names none of them, the assembly lists them. Each keeps its own durable queue,
 * so one whose write fails does not undo what another stored; the failure reaches the announcer,
 * as a lone sink's would.
 */
export function eventSinks(...sinks: EventSink[]): EventSink {
  return {
    async announce(...events: StoreEvent[]): Promise<void> {
      for (const sink of sinks) await sink.announce(...events);
    },
  };
}

/**
 * A stable event id from the event's natural key (a type and the ids it is about): the same
 * event announced twice gets the same id. Hashed, because webhook ids must be plain printable
 * ASCII without dots, and store domains and times carry dots.
 */
export function eventId(type: StoreEventType, ...key: string[]): string {
  return `evt_${createHash('sha256').update([type, ...key].join('\n')).digest('base64url').slice(0, 32)}`;
}

/**
 * What an agent hears of a subscription it made (docs/agents.md#callbacks): the product back for
 * it (its first alert sent), each alert sent, the alert's click, and an order credited to it.
 */
export const agentNewsTypes = ['subscription.restocked', 'alert.sent', 'alert.clicked', 'order.attributed'] as const;

export type AgentNewsType = (typeof agentNewsTypes)[number];

export interface AgentNews {
  type: AgentNewsType;
  subscriptionId: string;
  shop: string;
  occurredAt: string;
  data: Record<string, unknown>;
}

/**
 * Tells every process which subscriptions have news, on the change bus (SUBSCRIPTION_NEWS), for
 * the MCP sessions following them: the web process holds those, while the worker sends alerts.
 * It announces the store events that carry news (an alert sent, a confirmed sign-up, a click, an
 * order credited to an alert), whoever made the subscription; who may hear of it is decided where
 * it is heard.
 */
export function subscriptionNewsOnBus(changes: ChangeBus): EventSink {
  return {
    async announce(...events: StoreEvent[]): Promise<void> {
      const keys = [...new Set(events.flatMap(newsKeysOf))];
      // Not awaited: a publication waits for every other process to confirm it, and a shopper's
      // click or the worker's next batch must not wait for that. A lost one is a missed ping, and
      // the bus resets its listeners when it may have lost any.
      if (keys.length > 0) void changes.publish(SUBSCRIPTION_NEWS, keys);
    },
  };
}

function newsKeysOf(event: StoreEvent): string[] {
  const { subscriptionId, alertId, lines, confirmedAt } = event.data;
  switch (event.type) {
    case 'subscription.created':
      // Only a confirmed sign-up is news: it was pending, so a session may follow it. A new
      // subscription's id has only just been answered, so no one follows it yet, and every
      // sign-up would otherwise cost a message to every process.
      return typeof subscriptionId === 'string' && typeof confirmedAt === 'string' ? [subscriptionNewsKey(subscriptionId)] : [];
    case 'alert.sent':
      return typeof subscriptionId === 'string' ? [subscriptionNewsKey(subscriptionId)] : [];
    case 'alert.clicked':
      return typeof alertId === 'string' ? [alertNewsKey(alertId)] : [];
    case 'order.attributed':
      return (Array.isArray(lines) ? lines : []).flatMap((line: unknown) => {
        const id = (line as { alertId?: unknown } | null)?.alertId;
        return typeof id === 'string' ? [alertNewsKey(id)] : [];
      });
    default:
      return [];
  }
}

/** An A2A push configuration given with the message whose task made a subscription. */
export interface A2aPushRequest {
  subscriptionId: string;
  taskId: string;
  url: string;
  token?: string;
  authentication?: { scheme: string; credentials: string };
  /** The completed task to push, as the client's wire version writes it (`StoredA2aTask`). */
  task: { wire: '1.0' | '0.3'; body: Record<string, unknown> };
}

/**
 * Where an agent's subscriptions send their news: the outgoing-webhooks feature keeps them, the
 * operations that make subscriptions (subscribeAlert over HTTP, MCP and A2A) attach them.
 */
export interface SubscriptionCallbacks {
  /** The callback URL checked before anything is stored; throws the problem naming `pointer`. */
  checkUrl(text: string, pointer: string): URL;
  /** Points the subscription's callback at `url`; the agent's signing secret comes back the first time only. */
  attachCallback(agentId: string, subscriptionId: string, url: URL): Promise<{ callbackSecret?: string }>;
  attachA2aPush(agentId: string, request: A2aPushRequest): Promise<void>;
  subscriptionOfTask(agentId: string, taskId: string): Promise<{ subscriptionId: string; task: A2aPushRequest['task'] } | undefined>;
  callbacksOf(agentId: string, subscriptionId: string): Promise<Array<{ kind: 'callback' | 'a2a-push'; url: string; enabled: boolean }>>;
}
