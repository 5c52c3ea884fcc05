import { sql } from 'kysely';
import type { Database } from '../core/db/database.ts';
import type { SubscriptionCallbacksTable, WebhookEndpointKind } from '../core/db/schema.ts';
import type { EndpointRow } from './repository.ts';

export type CallbackRow = SubscriptionCallbacksTable;
/** A subscription's callback with its endpoint's address and state. */
export type SubscriptionCallbackRow = CallbackRow & Pick<EndpointRow, 'url' | 'enabled'>;

/**
 * Storage of agents' callbacks: their endpoints (rows of `webhook_endpoints` of kind `callback`
 * or `a2a-push`, owned by the agent), which subscription tells which endpoint, each agent's
 * signing secret, and the alerts sent for subscriptions with callbacks. Their deliveries go in
 * the outgoing-webhooks queue (`WebhookRepository`).
 */
export class CallbackRepository {
  constructor(private readonly database: Database) {}

  /** The agent's sealed callback secret, if it has one. */
  async agentSecret(agentId: string): Promise<string | undefined> {
    const row = await this.database.db.selectFrom('agent_callback_secrets').select('secret_sealed').where('agent_id', '=', agentId).executeTakeFirst();
    return row?.secret_sealed;
  }

  /** Keeps `sealed` as the agent's secret unless another request kept one first; `made` says whose was kept. */
  async keepAgentSecret(agentId: string, sealed: string, now: string): Promise<{ sealed: string; made: boolean }> {
    await this.database.writeStatement((db) =>
      db
        .insertInto('agent_callback_secrets')
        .values({ agent_id: agentId, secret_sealed: sealed, created_at: now })
        .onConflict((oc) => oc.column('agent_id').doNothing())
        .execute(),
    );
    const kept = (await this.agentSecret(agentId))!;
    return { sealed: kept, made: kept === sealed };
  }

  findAgentEndpoint(agentId: string, kind: Exclude<WebhookEndpointKind, 'store'>, url: string): Promise<EndpointRow | undefined> {
    return this.database.db.selectFrom('webhook_endpoints').selectAll().where('agent_id', '=', agentId).where('kind', '=', kind).where('url', '=', url).orderBy('created_at').executeTakeFirst();
  }

  /** Inserts an agent's endpoint unless it already has `limit` of that kind; false when it has. */
  insertAgentEndpoint(row: EndpointRow, limit: number): Promise<boolean> {
    return this.database.write(async (trx) => {
      if (this.database.dialect === 'postgres') await sql`select pg_advisory_xact_lock(hashtext(${`agent-endpoints\n${row.agent_id}`}))`.execute(trx);
      const { n } = await trx
        .selectFrom('webhook_endpoints')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('agent_id', '=', row.agent_id)
        .where('kind', '=', row.kind)
        .executeTakeFirstOrThrow();
      if (Number(n) >= limit) return false;
      await trx.insertInto('webhook_endpoints').values(row).execute();
      return true;
    });
  }

  /** The subscription's callback (one per kind for callbacks: a new URL replaces the former), in one write. */
  async replaceCallback(row: CallbackRow): Promise<void> {
    await this.database.write(async (trx) => {
      if (row.kind === 'callback') await trx.deleteFrom('subscription_callbacks').where('subscription_id', '=', row.subscription_id).where('kind', '=', 'callback').execute();
      await trx
        .insertInto('subscription_callbacks')
        .values(row)
        .onConflict((oc) => oc.columns(['subscription_id', 'endpoint_id']).doNothing())
        .execute();
    });
  }

  /** The A2A push configurations kept for an agent's task. */
  a2aPushesOf(agentId: string, taskId: string): Promise<CallbackRow[]> {
    return this.database.db.selectFrom('subscription_callbacks').selectAll().where('agent_id', '=', agentId).where('a2a_task_id', '=', taskId).where('kind', '=', 'a2a-push').execute();
  }

  /** The callbacks of these subscriptions, with their endpoints' URLs (enabled ones only, when asked). */
  async callbacksOf(subscriptionIds: string[], { enabledOnly }: { enabledOnly: boolean }): Promise<SubscriptionCallbackRow[]> {
    if (subscriptionIds.length === 0) return [];
    let query = this.database.db
      .selectFrom('subscription_callbacks as c')
      .innerJoin('webhook_endpoints as e', 'e.id', 'c.endpoint_id')
      .selectAll('c')
      .select(['e.url', 'e.enabled'])
      // The endpoint is the same agent's: a row pointing elsewhere is never followed.
      .whereRef('e.agent_id', '=', 'c.agent_id')
      .where('c.subscription_id', 'in', subscriptionIds);
    if (enabledOnly) query = query.where('e.enabled', '=', 1);
    return query.execute();
  }

  async rememberAlerts(rows: Array<{ alert_id: string; subscription_id: string; created_at: string }>): Promise<void> {
    if (rows.length === 0) return;
    await this.database.writeStatement((db) =>
      db
        .insertInto('callback_alerts')
        .values(rows)
        .onConflict((oc) => oc.column('alert_id').doNothing())
        .execute(),
    );
  }

  /** The subscriptions (with callbacks) these alerts were sent for, by alert id. */
  async subscriptionsOfAlerts(alertIds: string[]): Promise<Map<string, string>> {
    const rows = await this.database.db.selectFrom('callback_alerts').select(['alert_id', 'subscription_id']).where('alert_id', 'in', alertIds).execute();
    return new Map(rows.map((row) => [row.alert_id, row.subscription_id]));
  }
}
