import { randomBytes } from 'node:crypto';
import { chunks } from '../core/chunks.ts';
import { nowIso } from '../core/clock.ts';
import type { EventSink, StoreEvent, StoreEventType } from '../core/events.ts';
import { storeEventTypes } from '../core/events.ts';
import { ownStore, type Caller } from '../core/http/caller.ts';
import { newOpaqueId } from '../core/ids.ts';
import { checkNewDestination } from '../core/net/destination.ts';
import type { OutboundPolicy } from '../core/net/outbound-guard.ts';
import { Conflict, NotFound, Problem } from '../core/problems.ts';
import type { SecretBox } from '../core/sealed-secrets.ts';
import type { AgentCallbacks } from './callbacks.ts';
import { pendingDelivery, type AttemptRow, type DeliveryRow, type EndpointRow, type WebhookRepository } from './repository.ts';
import {
  MAX_ENDPOINTS_PER_STORE,
  type CreatedEndpoint,
  type CreateEndpointInput,
  type Delivery,
  type Endpoint,
  type UpdateEndpointInput,
} from './schemas.ts';

/** `webhook-id` is signed as `{id}.{timestamp}.{body}`: no dot, no space, printable ASCII (Standard Webhooks). */
const EVENT_ID = /^[\x21-\x2d\x2f-\x7e]{1,255}$/;

/** A webhook URL the service will not deliver to; `errors` points at the field. */
export class ForbiddenWebhookDestination extends Problem {
  constructor(pointer: string, reason: string) {
    super('forbidden-webhook-destination', `The webhook URL ${reason}.`, { extensions: { errors: [{ pointer, message: reason }] } });
  }
}

export interface WebhookServiceDeps {
  repository: WebhookRepository;
  secrets: SecretBox;
  /** Where tenants' endpoints may be (config TENANT_OUTBOUND_ALLOW). */
  policy: OutboundPolicy;
  /** Agents' callbacks, which hear of their own subscriptions' events. */
  callbacks: AgentCallbacks;
}

/**
 * Outgoing webhooks: the endpoints a store registers, and the sink every feature announces the
 * store's events to. Each announced event becomes one delivery per endpoint that takes its type;
 * the delivery job (delivery.ts) signs and sends them.
 */
export class WebhookService implements EventSink {
  /** Agents' callbacks and A2A pushes (callbacks.ts), for the operations that make subscriptions. */
  readonly callbacks: AgentCallbacks;

  constructor(private readonly deps: WebhookServiceDeps) {
    this.callbacks = deps.callbacks;
  }

  /**
   * Stores one delivery per enabled endpoint of the event's store that takes its type, reading
   * each store's endpoints once however many events it has; an event announced again adds none.
   */
  async announce(...events: StoreEvent[]): Promise<void> {
    for (const event of events) {
      if (!EVENT_ID.test(event.id)) throw new Error(`An event id must be 1 to 255 printable ASCII characters without '.' or spaces (it is the webhook-id): ${JSON.stringify(event.id.slice(0, 40))}`);
    }
    const now = nowIso();
    const rows: DeliveryRow[] = [];
    for (const storeDomain of new Set(events.map((event) => event.storeDomain.toLowerCase()))) {
      const endpoints = await this.deps.repository.enabledEndpoints(storeDomain);
      if (endpoints.length === 0) continue;
      for (const event of events.filter((candidate) => candidate.storeDomain.toLowerCase() === storeDomain)) {
        rows.push(...deliveriesOf(event, storeDomain, endpoints.filter((endpoint) => eventTypesOf(endpoint).includes(event.type)), now));
      }
    }
    for (const chunk of chunks(rows, 200)) await this.deps.repository.insertDeliveries(chunk);
    await this.deps.callbacks.route(events);
  }

  async listEndpoints(caller: Caller, domain: string): Promise<Endpoint[]> {
    const store = ownStore(caller, domain);
    return (await this.deps.repository.listEndpoints(store)).map(presentEndpoint);
  }

  async getEndpoint(caller: Caller, domain: string, endpointId: string): Promise<Endpoint> {
    return presentEndpoint(await this.mustFind(ownStore(caller, domain), endpointId));
  }

  /** A new endpoint and its signing secret, which is handed out this once and kept sealed. */
  async createEndpoint(caller: Caller, domain: string, input: CreateEndpointInput): Promise<CreatedEndpoint> {
    const store = ownStore(caller, domain);
    const url = this.checkedUrl(input.url);
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const now = nowIso();
    const row: EndpointRow = {
      id: newOpaqueId('whe'),
      store_domain: store,
      url,
      event_types: JSON.stringify(input.eventTypes ?? [...storeEventTypes]),
      enabled: 1,
      disabled_reason: null,
      disabled_at: null,
      secret_sealed: await this.deps.secrets.seal(secret),
      consecutive_failures: 0,
      failing_since: null,
      created_at: now,
      updated_at: now,
      kind: 'store',
      agent_id: null,
    };
    if (!(await this.deps.repository.insertEndpoint(row, MAX_ENDPOINTS_PER_STORE))) {
      throw new Conflict(`${store} already has ${MAX_ENDPOINTS_PER_STORE} webhook endpoints, the most a store may have; delete one first.`);
    }
    return { ...presentEndpoint(row), secret };
  }

  /** Changes the URL or types; `enabled: false` cancels what is pending, `enabled: true` starts afresh (failures forgotten). */
  async updateEndpoint(caller: Caller, domain: string, endpointId: string, patch: UpdateEndpointInput): Promise<Endpoint> {
    const store = ownStore(caller, domain);
    const current = await this.mustFind(store, endpointId);
    const now = nowIso();
    const changes: Partial<EndpointRow> = { updated_at: now };
    if (patch.url !== undefined) changes.url = this.checkedUrl(patch.url);
    if (patch.eventTypes !== undefined) changes.event_types = JSON.stringify(patch.eventTypes);
    if (patch.enabled === true && current.enabled === 0) {
      Object.assign(changes, { enabled: 1, disabled_reason: null, disabled_at: null, consecutive_failures: 0, failing_since: null });
    }
    if (patch.enabled === false && current.enabled === 1) await this.deps.repository.disableEndpoint(current.id, 'disabled by the store', now);
    const updated = await this.deps.repository.updateEndpoint(store, current.id, changes);
    if (!updated) throw new NotFound(`No webhook endpoint ${endpointId} for ${store}.`);
    return presentEndpoint(updated);
  }

  async deleteEndpoint(caller: Caller, domain: string, endpointId: string): Promise<void> {
    const store = ownStore(caller, domain);
    if (!(await this.deps.repository.deleteEndpoint(store, endpointId))) throw new NotFound(`No webhook endpoint ${endpointId} for ${store}.`);
  }

  /** The endpoint's deliveries, newest first, each with its attempts. */
  async listDeliveries(caller: Caller, domain: string, endpointId: string, limit = 50): Promise<Delivery[]> {
    const endpoint = await this.mustFind(ownStore(caller, domain), endpointId);
    return (await this.deps.repository.listDeliveries(endpoint.id, limit)).map(({ delivery, attempts }) => presentDelivery(delivery, attempts));
  }

  private checkedUrl(text: string): string {
    const checked = checkNewDestination(text, this.deps.policy);
    if ('refused' in checked) throw new ForbiddenWebhookDestination('/body/url', checked.refused);
    return checked.url.href;
  }

  private async mustFind(store: string, endpointId: string): Promise<EndpointRow> {
    const row = await this.deps.repository.findEndpoint(store, endpointId);
    if (!row) throw new NotFound(`No webhook endpoint ${endpointId} for ${store}.`);
    return row;
  }
}

/** One pending delivery of the event per endpoint, each the same signed-later payload. */
function deliveriesOf(event: StoreEvent, storeDomain: string, endpoints: Array<Pick<EndpointRow, 'id'>>, now: string): DeliveryRow[] {
  const payload = JSON.stringify({ type: event.type, timestamp: event.occurredAt, data: event.data });
  return endpoints.map((endpoint) => pendingDelivery({ endpoint_id: endpoint.id, store_domain: storeDomain, event_id: event.id, event_type: event.type, payload }, now));
}

function eventTypesOf(endpoint: Pick<EndpointRow, 'event_types'>): StoreEventType[] {
  return JSON.parse(endpoint.event_types) as StoreEventType[];
}

function presentEndpoint(row: EndpointRow): Endpoint {
  return {
    endpointId: row.id,
    url: row.url,
    eventTypes: eventTypesOf(row),
    enabled: row.enabled === 1,
    disabledReason: row.disabled_reason,
    disabledAt: row.disabled_at,
    consecutiveFailures: row.consecutive_failures,
    failingSince: row.failing_since,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function presentDelivery(row: DeliveryRow, attempts: AttemptRow[]): Delivery {
  return {
    deliveryId: row.id,
    eventId: row.event_id,
    eventType: row.event_type as StoreEventType,
    status: row.status,
    attempts: row.attempts,
    nextAttemptAt: row.next_attempt_at,
    lastError: row.last_error,
    createdAt: row.created_at,
    finishedAt: row.finished_at,
    log: attempts.map((attempt) => ({
      attempt: attempt.attempt,
      attemptedAt: attempt.attempted_at,
      statusCode: attempt.status_code,
      error: attempt.error,
      durationMs: attempt.duration_ms,
    })),
  };
}
