import { nowIso } from '../core/clock.ts';
import type { EventSink, StoreEvent, StoreEventType } from '../core/events.ts';
import { ownStore, type Caller } from '../core/http/caller.ts';
import { newId } from '../core/ids.ts';
import { NotFound, Problem, ValidationFailed } from '../core/problems.ts';
import type { SecretBox } from '../core/sealed-secrets.ts';
import { errorCodes, type KlaviyoApi } from './api.ts';
import { alertsOf, KLAVIYO_METRICS, klaviyoEventBody } from './events.ts';
import type { KlaviyoConnectionRow, KlaviyoEventRow, KlaviyoRepository } from './repository.ts';
import { klaviyoConnectionInput, type KlaviyoConnection, type KlaviyoConnectionInput } from './schemas.ts';

export { KLAVIYO_METRICS } from './events.ts';

/** The newest event Klaviyo did not take, for the store's owner: what Klaviyo said, and whether it is tried again. */
export interface KlaviyoDeliveryTrouble {
  /** The Klaviyo metric of the event. */
  metric: string;
  /** When it was queued, as the store's event happened. */
  queuedAt: string;
  /** Klaviyo's status (null when no answer came). */
  statusCode: number | null;
  /** What went wrong, as kept: Klaviyo's status and error codes, or why no answer came. */
  error: string;
  /** When it is tried again; null once given up. */
  retryAt: string | null;
}

export interface KlaviyoServiceDeps {
  repository: KlaviyoRepository;
  secrets: SecretBox;
  api: KlaviyoApi;
}

/**
 * A store's Klaviyo account: connecting it (the key checked with Klaviyo, then sealed), and the
 * sink that turns the store's events into queued Klaviyo events on the shopper's profile. The
 * delivery job (delivery.ts) sends them.
 */
export class KlaviyoService implements EventSink {
  constructor(private readonly deps: KlaviyoServiceDeps) {}

  async connect(caller: Caller, domain: string, given: KlaviyoConnectionInput): Promise<KlaviyoConnection> {
    const store = ownStore(caller, domain);
    const input = klaviyoConnectionInput.safeParse(given);
    if (!input.success) throw new ValidationFailed(input.error.issues.map((issue) => ({ pointer: `/body/${String(issue.path[0])}`, message: issue.message })));
    const key = input.data.privateApiKey;
    // Sealing needs the encryption key: refused before Klaviyo hears of the key.
    const sealed = await this.deps.secrets.seal(key);
    const answer = await this.deps.api.accounts(key);
    if (answer.status === 401 || answer.status === 403) {
      const codes = errorCodes(answer.body);
      const why = answer.status === 401 ? 'was refused by Klaviyo' : 'lacks the scope accounts:read';
      throw new ValidationFailed([{ pointer: '/body/privateApiKey', message: `${why} (${answer.status}${codes.length ? ` ${codes.join(', ')}` : ''}); nothing was stored` }]);
    }
    if (answer.status !== 200) {
      throw new Problem('upstream-failed', `Klaviyo could not check the key (${answer.failure ?? `it answered ${answer.status}`}). Nothing was stored; try again.`);
    }
    const accountId = accountIdOf(answer.body);
    const now = nowIso();
    const row: KlaviyoConnectionRow = {
      store_domain: store,
      status: 'connected',
      key_sealed: sealed,
      key_hint: key.slice(-4),
      account_id: accountId,
      connected_at: now,
      disconnected_at: null,
      disconnect_reason: null,
      updated_at: now,
    };
    await this.deps.repository.save(row);
    return this.present(row);
  }

  async connectionFor(caller: Caller, domain: string): Promise<KlaviyoConnection> {
    const store = ownStore(caller, domain);
    const row = await this.deps.repository.find(store);
    if (!row) throw new NotFound(`${store} has never been connected to Klaviyo.`);
    return this.present(row);
  }

  /** The key is forgotten and what was still queued for Klaviyo is cancelled. */
  async disconnect(caller: Caller, domain: string): Promise<KlaviyoConnection> {
    const store = ownStore(caller, domain);
    if (!(await this.deps.repository.find(store))) throw new NotFound(`${store} has never been connected to Klaviyo.`);
    await this.deps.repository.disconnect(store, 'disconnected by the store', nowIso());
    return this.present((await this.deps.repository.find(store))!);
  }

  /**
   * What went wrong with the newest event of the current connection that Klaviyo has not taken
   * (still retried, or given up); null when nothing did. A key replaced since is not blamed for
   * what the former one was refused.
   */
  async latestTrouble(caller: Caller, domain: string): Promise<KlaviyoDeliveryTrouble | null> {
    const store = ownStore(caller, domain);
    const connection = await this.deps.repository.find(store);
    if (!connection) return null;
    const row = await this.deps.repository.latestTrouble(store, connection.connected_at);
    if (!row?.last_error) return null;
    return {
      metric: KLAVIYO_METRICS[row.event_type as StoreEventType] ?? row.event_type,
      queuedAt: row.created_at,
      statusCode: row.last_status_code,
      error: row.last_error,
      retryAt: row.status === 'pending' ? row.next_attempt_at : null,
    };
  }

  /**
   * Queues each event Klaviyo takes, for stores connected to Klaviyo, on the profile it is about:
   * the address a sign-up or an alert names, or, for a click or an order, the address its alert
   * went to (as queued here when it was sent; an alert sent before the store connected has none,
   * and its click or order is not sent). Other stores' events never reach this queue.
   */
  async announce(...events: StoreEvent[]): Promise<void> {
    const wanted = events.filter((event) => KLAVIYO_METRICS[event.type] !== undefined);
    if (wanted.length === 0) return;
    const connected = await this.deps.repository.connectedAmong([...new Set(wanted.map((event) => event.storeDomain.toLowerCase()))]);
    const now = nowIso();
    const rows: KlaviyoEventRow[] = [];
    for (const store of connected) {
      const own = wanted.filter((event) => event.storeDomain.toLowerCase() === store);
      const addresses = await this.deps.repository.addressesOfAlerts(store, [...new Set(own.flatMap(alertsOf))]);
      for (const event of own) {
        const email = typeof event.data.email === 'string' ? event.data.email : alertsOf(event).map((id) => addresses.get(id)).find((address) => address !== undefined);
        if (email === undefined) continue;
        const body = klaviyoEventBody(event, email, store);
        if (body === undefined) continue;
        rows.push({
          id: newId('kle'),
          store_domain: store,
          event_id: event.id,
          event_type: event.type,
          alert_id: event.type === 'alert.sent' && typeof event.data.alertId === 'string' ? event.data.alertId : null,
          email: event.type === 'alert.sent' ? email : null,
          body,
          status: 'pending',
          attempts: 0,
          next_attempt_at: now,
          last_status_code: null,
          last_error: null,
          created_at: now,
          finished_at: null,
        });
      }
    }
    await this.deps.repository.enqueue(rows);
  }

  private async present(row: KlaviyoConnectionRow): Promise<KlaviyoConnection> {
    const recent = await this.deps.repository.recent(row.store_domain, 1000);
    const count = (status: KlaviyoEventRow['status']) => recent.filter((event) => event.status === status).length;
    return {
      shop: row.store_domain,
      status: row.status,
      keyHint: row.key_hint,
      accountId: row.account_id,
      connectedAt: row.connected_at,
      disconnectedAt: row.disconnected_at,
      disconnectReason: row.disconnect_reason,
      events: { pending: count('pending'), delivered: count('delivered'), failed: count('failed') },
    };
  }
}

function accountIdOf(body: unknown): string | null {
  const data = (body as { data?: unknown } | undefined)?.data;
  const first = Array.isArray(data) ? data[0] : undefined;
  const id = (first as { id?: unknown } | undefined)?.id;
  return typeof id === 'string' && id.length <= 64 ? id : null;
}
