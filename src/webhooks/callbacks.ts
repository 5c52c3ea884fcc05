import { createHash, randomBytes, randomUUID } from 'node:crypto';
import net from 'node:net';
import { nowIso } from '../core/clock.ts';
import type { AgentNews, AgentNewsType, A2aPushRequest, StoreEvent, SubscriptionCallbacks } from '../core/events.ts';
import { newOpaqueId } from '../core/ids.ts';
import { checkNewDestination } from '../core/net/destination.ts';
import { isAllowedDestination, type OutboundPolicy } from '../core/net/outbound-guard.ts';
import { Conflict, NotConfigured } from '../core/problems.ts';
import type { SecretBox } from '../core/sealed-secrets.ts';
import type { CallbackRepository, SubscriptionCallbackRow } from './callback-repository.ts';
import { pendingDelivery, type DeliveryRow, type EndpointRow, type WebhookRepository } from './repository.ts';
import { ForbiddenWebhookDestination } from './service.ts';

/** A2A's push notification token header, as the protocol's SDK sends it. */
export const A2A_TOKEN_HEADER = 'X-A2A-Notification-Token';
/** Callback URLs an agent may hold at once; each subscription names one of them. */
export const MAX_CALLBACK_URLS_PER_AGENT = 20;
/** A2A push configurations one task may carry. */
export const MAX_PUSH_CONFIGS_PER_TASK = 4;

/** What an A2A push needs at event time: the task it completes, as the client's wire version writes it. */
export interface StoredA2aTask {
  wire: '1.0' | '0.3';
  /** The completed task's JSON (1.0: a StreamResponse `{"task": …}`; 0.3: the Task), without the news artifact. */
  body: Record<string, unknown>;
}

export interface AgentCallbacksDeps {
  /** The outgoing-webhooks queue the news is delivered through. */
  repository: WebhookRepository;
  callbacks: CallbackRepository;
  secrets: SecretBox;
  policy: OutboundPolicy;
}

/**
 * Restock news for the agent that asked: callbacks an agent attaches to the subscriptions it
 * makes, and the A2A push configurations of its subscribe tasks. Each is an endpoint of the
 * outgoing-webhooks queue owned by the agent (`kind` callback or a2a-push), so deliveries share the
 * store webhooks' queue, retries, outbound guard and signatures, and never meet a store's
 * endpoints: those are read by store, these by subscription.
 */
export class AgentCallbacks implements SubscriptionCallbacks {
  constructor(private readonly deps: AgentCallbacksDeps) {}

  /**
   * A callback URL as the agent gives it, checked before anything is stored: http(s), no
   * credentials, not an internal host; https unless it is an IP address the operator admitted
   * (TENANT_OUTBOUND_ALLOW, a local receiver in development), since the signed news names the
   * shopper's subscription.
   */
  checkUrl(text: string, pointer: string): URL {
    // The secret is sealed: without the key nothing could be kept, so nothing is stored at all.
    if (!this.deps.secrets.available) throw new NotConfigured('Callbacks need RESTOCK_ENCRYPTION_KEY (32 random bytes, base64): their signing secrets are never kept in clear.');
    const checked = checkNewDestination(text, this.deps.policy);
    if ('refused' in checked) throw new ForbiddenWebhookDestination(pointer, checked.refused);
    const admittedPlain = net.isIP(checked.host) !== 0 && this.deps.policy.allowed !== undefined && isAllowedDestination(checked.host, this.deps.policy);
    if (checked.url.protocol !== 'https:' && !admittedPlain) throw new ForbiddenWebhookDestination(pointer, 'must be an https:// URL');
    return checked.url;
  }

  /**
   * Points the subscription's callback at `url` (replacing the one it had), reusing the agent's
   * endpoint for that URL. The agent's secret is made on its first callback and returned only then.
   */
  async attachCallback(agentId: string, subscriptionId: string, url: URL): Promise<{ callbackSecret?: string }> {
    const { sealed, secret } = await this.agentSecret(agentId);
    let endpoint = await this.deps.callbacks.findAgentEndpoint(agentId, 'callback', url.href);
    if (!endpoint) {
      const row = agentEndpointRow(agentId, 'callback', url.href, sealed);
      if (!(await this.deps.callbacks.insertAgentEndpoint(row, MAX_CALLBACK_URLS_PER_AGENT))) {
        throw new Conflict(`This agent already uses ${MAX_CALLBACK_URLS_PER_AGENT} callback URLs, the most an agent may use; give one of them.`);
      }
      endpoint = row;
    }
    await this.deps.callbacks.replaceCallback({
      subscription_id: subscriptionId,
      endpoint_id: endpoint.id,
      agent_id: agentId,
      kind: 'callback',
      a2a_task_id: null,
      a2a_task: null,
      created_at: nowIso(),
    });
    return secret === undefined ? {} : { callbackSecret: secret };
  }

  /** An A2A push configuration of the task that made the subscription: the task completes, pushed, when the product is back for it. */
  async attachA2aPush(agentId: string, request: A2aPushRequest): Promise<void> {
    const url = this.checkUrl(request.url, '/configuration/taskPushNotificationConfig/url');
    // A2A 1.0 posts its StreamResponse as application/a2a+json; 0.3 the bare task as JSON.
    const headers: Record<string, string> = { 'content-type': request.task.wire === '1.0' ? 'application/a2a+json' : 'application/json' };
    if (request.authentication) headers.authorization = `${request.authentication.scheme} ${request.authentication.credentials}`;
    else if (request.token) headers[A2A_TOKEN_HEADER.toLowerCase()] = request.token;
    const existing = await this.deps.callbacks.a2aPushesOf(agentId, request.taskId);
    if (existing.length >= MAX_PUSH_CONFIGS_PER_TASK) throw new Conflict(`This task already has ${MAX_PUSH_CONFIGS_PER_TASK} push notification configurations, the most a task may have.`);
    const row = agentEndpointRow(agentId, 'a2a-push', url.href, await this.deps.secrets.seal(JSON.stringify({ headers })));
    await this.deps.callbacks.insertAgentEndpoint(row, Number.MAX_SAFE_INTEGER);
    await this.deps.callbacks.replaceCallback({
      subscription_id: request.subscriptionId,
      endpoint_id: row.id,
      agent_id: agentId,
      kind: 'a2a-push',
      a2a_task_id: request.taskId,
      a2a_task: JSON.stringify(request.task satisfies StoredA2aTask),
      created_at: nowIso(),
    });
  }

  /** The subscription an agent's A2A task made, if it asked for pushes (a later push configuration joins it). */
  async subscriptionOfTask(agentId: string, taskId: string): Promise<{ subscriptionId: string; task: StoredA2aTask } | undefined> {
    const [row] = await this.deps.callbacks.a2aPushesOf(agentId, taskId);
    return row && { subscriptionId: row.subscription_id, task: JSON.parse(row.a2a_task!) as StoredA2aTask };
  }

  /** Where the subscription's news goes, for the agent that made it. */
  async callbacksOf(agentId: string, subscriptionId: string): Promise<Array<{ kind: 'callback' | 'a2a-push'; url: string; enabled: boolean }>> {
    const rows = await this.deps.callbacks.callbacksOf([subscriptionId], { enabledOnly: false });
    return rows.filter((row) => row.agent_id === agentId).map((row) => ({ kind: row.kind, url: row.url, enabled: row.enabled === 1 }));
  }

  /**
   * The store events that are news for subscriptions with callbacks, queued for those callbacks:
   * `alert.sent` (and, for the first alert, `subscription.restocked`), then the alert's click and
   * the order it led to, each found through the alert sent. Only the subscription's own news, in
   * words of its own: no other shopper, no amounts.
   */
  async route(events: StoreEvent[]): Promise<void> {
    const sentTo = new Set<string>();
    const alertIds = new Set<string>();
    for (const event of events) {
      if (event.type === 'alert.sent' && typeof event.data.subscriptionId === 'string') sentTo.add(event.data.subscriptionId);
      if (event.type === 'alert.clicked' && typeof event.data.alertId === 'string') alertIds.add(event.data.alertId);
      if (event.type === 'order.attributed') for (const line of linesOf(event)) alertIds.add(line.alertId);
    }
    if (sentTo.size === 0 && alertIds.size === 0) return;
    const alertSubscriptions = alertIds.size > 0 ? await this.deps.callbacks.subscriptionsOfAlerts([...alertIds]) : new Map<string, string>();
    const targets = await this.deps.callbacks.callbacksOf([...new Set([...sentTo, ...alertSubscriptions.values()])], { enabledOnly: true });
    if (targets.length === 0) return;
    const bySubscription = new Map<string, SubscriptionCallbackRow[]>();
    for (const target of targets) bySubscription.set(target.subscription_id, [...(bySubscription.get(target.subscription_id) ?? []), target]);

    const news: Array<{ event: StoreEvent; item: AgentNews }> = [];
    const remembered: Array<{ alert_id: string; subscription_id: string; created_at: string }> = [];
    for (const event of events) news.push(...newsOf(event, bySubscription, alertSubscriptions).map((item) => ({ event, item })));
    for (const { event, item } of news) {
      if (event.type === 'alert.sent' && item.type === 'alert.sent') remembered.push({ alert_id: String(event.data.alertId), subscription_id: item.subscriptionId, created_at: nowIso() });
    }
    if (remembered.length > 0) await this.deps.callbacks.rememberAlerts(remembered);
    const now = nowIso();
    const rows: DeliveryRow[] = [];
    for (const { event, item } of news) {
      for (const target of bySubscription.get(item.subscriptionId) ?? []) {
        const payload = target.kind === 'callback' ? callbackPayload(item) : item.type === 'subscription.restocked' ? a2aPayload(target, item) : undefined;
        if (payload === undefined) continue;
        rows.push(pendingDelivery({ endpoint_id: target.endpoint_id, store_domain: event.storeDomain.toLowerCase(), event_id: agentEventId(item.type, item.subscriptionId, event.id), event_type: item.type, payload }, now));
      }
    }
    await this.deps.repository.insertDeliveries(rows);
  }

  /** The agent's one secret for all its callbacks, made (and shown) once. */
  private async agentSecret(agentId: string): Promise<{ sealed: string; secret?: string }> {
    const existing = await this.deps.callbacks.agentSecret(agentId);
    if (existing) return { sealed: existing };
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const { sealed, made } = await this.deps.callbacks.keepAgentSecret(agentId, await this.deps.secrets.seal(secret), nowIso());
    return made ? { sealed, secret } : { sealed };
  }
}

function agentEndpointRow(agentId: string, kind: 'callback' | 'a2a-push', url: string, sealed: string): EndpointRow {
  const now = nowIso();
  return {
    id: newOpaqueId(kind === 'callback' ? 'cbe' : 'a2p'),
    // A store's endpoints are read by store; an agent's by subscription: none is ever both.
    store_domain: '',
    url,
    event_types: JSON.stringify(kind === 'callback' ? ['subscription.restocked', 'alert.sent', 'alert.clicked', 'order.attributed'] : ['subscription.restocked']),
    enabled: 1,
    disabled_reason: null,
    disabled_at: null,
    secret_sealed: sealed,
    consecutive_failures: 0,
    failing_since: null,
    created_at: now,
    updated_at: now,
    kind,
    agent_id: agentId,
  };
}

interface AttributedLine {
  alertId: string;
  kind: string;
}

function linesOf(event: StoreEvent): AttributedLine[] {
  const lines = Array.isArray(event.data.lines) ? event.data.lines : [];
  return lines.flatMap((line: unknown) => {
    const record = line as Record<string, unknown> | null;
    return record && typeof record.alertId === 'string' ? [{ alertId: record.alertId, kind: typeof record.kind === 'string' ? record.kind : 'assisted' }] : [];
  });
}

/** What one store event tells the subscriptions that have callbacks. */
function newsOf(event: StoreEvent, targets: Map<string, unknown>, alertSubscriptions: Map<string, string>): AgentNews[] {
  const common = (subscriptionId: string) => ({ subscriptionId, shop: event.storeDomain.toLowerCase(), occurredAt: event.occurredAt });
  const str = (value: unknown) => (typeof value === 'string' ? value : null);
  if (event.type === 'alert.sent') {
    const subscriptionId = str(event.data.subscriptionId);
    if (subscriptionId === null || !targets.has(subscriptionId)) return [];
    const about = { productId: str(event.data.productId), variantId: str(event.data.variantId) };
    const sent: AgentNews = { ...common(subscriptionId), type: 'alert.sent', data: { ...about, alertId: str(event.data.alertId), kind: str(event.data.kind), channel: str(event.data.channel), sentAt: str(event.data.sentAt) } };
    // A reminder is a second message about the same restock: the product came back once.
    return event.data.kind === 'alert' ? [{ ...common(subscriptionId), type: 'subscription.restocked', data: { ...about, restockId: str(event.data.restockId) } }, sent] : [sent];
  }
  if (event.type === 'alert.clicked') {
    const alertId = str(event.data.alertId);
    const subscriptionId = alertId === null ? undefined : alertSubscriptions.get(alertId);
    if (subscriptionId === undefined || !targets.has(subscriptionId)) return [];
    return [{ ...common(subscriptionId), type: 'alert.clicked', data: { alertId, productId: str(event.data.productId), variantId: str(event.data.variantId), clickedAt: str(event.data.clickedAt) } }];
  }
  if (event.type === 'order.attributed') {
    const found = new Map<string, AttributedLine[]>();
    for (const line of linesOf(event)) {
      const subscriptionId = alertSubscriptions.get(line.alertId);
      if (subscriptionId !== undefined && targets.has(subscriptionId)) found.set(subscriptionId, [...(found.get(subscriptionId) ?? []), line]);
    }
    return [...found].map(([subscriptionId, lines]) => ({
      ...common(subscriptionId),
      type: 'order.attributed' as const,
      data: { alertId: lines[0]!.alertId, attribution: lines.some((line) => line.kind === 'direct') ? 'direct' : 'assisted', placedAt: str(event.data.placedAt) },
    }));
  }
  return [];
}

function callbackPayload(item: AgentNews): string {
  return JSON.stringify({ type: item.type, timestamp: item.occurredAt, data: { subscriptionId: item.subscriptionId, shop: item.shop, ...item.data } });
}

/** The task its subscribe message made, completed now with the news as a second artifact, in the client's wire version. */
function a2aPayload(target: SubscriptionCallbackRow, item: AgentNews): string | undefined {
  if (target.a2a_task === null) return undefined;
  const stored = JSON.parse(target.a2a_task) as StoredA2aTask;
  const news = { type: item.type, subscriptionId: item.subscriptionId, shop: item.shop, occurredAt: item.occurredAt, ...item.data };
  const body = structuredClone(stored.body);
  const task = (stored.wire === '1.0' ? body.task : body) as { status?: Record<string, unknown>; artifacts?: unknown[] };
  const artifactId = randomUUID();
  const artifact =
    stored.wire === '1.0'
      ? { artifactId, name: 'news', description: 'The product is back in stock for this subscription.', parts: [{ data: news, mediaType: 'application/json' }] }
      : { artifactId, name: 'news', description: 'The product is back in stock for this subscription.', parts: [{ kind: 'data', data: news }] };
  task.artifacts = [...(task.artifacts ?? []), artifact];
  task.status = { ...(task.status ?? {}), timestamp: item.occurredAt };
  return JSON.stringify(body);
}

/** Stable per agent event: the same store event routed twice queues one delivery per endpoint. */
function agentEventId(type: AgentNewsType, subscriptionId: string, storeEventId: string): string {
  return `evt_${createHash('sha256').update(['agent', type, subscriptionId, storeEventId].join('\n')).digest('base64url').slice(0, 32)}`;
}
