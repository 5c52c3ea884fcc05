import type { Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * Restock news for the agent that asked: an agent's callback URLs and A2A push configurations are
 * endpoints of the outgoing-webhooks queue (`webhook_endpoints` with `kind` and the owning
 * `agent_id`; a store's own endpoints are `kind = 'store'` with no agent), so they share its
 * deliveries, retries, outbound guard and log. `subscription_callbacks` says which of them hear
 * of which subscription; `callback_alerts` remembers which alert was sent for which of those
 * subscriptions, so that its click and the order it led to reach the same agent;
 * `agent_callback_secrets` holds each agent's one Standard Webhooks secret, sealed.
 */
export const agentCallbacks: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);
    await db.schema.alterTable('webhook_endpoints').addColumn('kind', 'text', (c) => c.notNull().defaultTo('store')).execute();
    await db.schema.alterTable('webhook_endpoints').addColumn('agent_id', 'text').execute();
    await db.schema.createIndex('webhook_endpoints_by_agent').on('webhook_endpoints').columns(['agent_id', 'kind']).execute();

    await db.schema
      .createTable('agent_callback_secrets')
      .addColumn('agent_id', 'text', (c) => c.primaryKey())
      .addColumn('secret_sealed', 'text', (c) => c.notNull())
      .addColumn('created_at', ts, (c) => c.notNull())
      .execute();

    await db.schema
      .createTable('subscription_callbacks')
      .addColumn('subscription_id', 'text', (c) => c.notNull())
      .addColumn('endpoint_id', 'text', (c) => c.notNull())
      .addColumn('agent_id', 'text', (c) => c.notNull())
      .addColumn('kind', 'text', (c) => c.notNull())
      // For an A2A push: the task it updates (id, context, wire version, the subscription's answer), as JSON.
      .addColumn('a2a_task_id', 'text')
      .addColumn('a2a_task', 'text')
      .addColumn('created_at', ts, (c) => c.notNull())
      .addPrimaryKeyConstraint('subscription_callbacks_pk', ['subscription_id', 'endpoint_id'])
      .execute();
    await db.schema.createIndex('subscription_callbacks_by_task').on('subscription_callbacks').columns(['agent_id', 'a2a_task_id']).execute();
    await db.schema.createIndex('subscription_callbacks_by_endpoint').on('subscription_callbacks').columns(['endpoint_id']).execute();

    await db.schema
      .createTable('callback_alerts')
      .addColumn('alert_id', 'text', (c) => c.primaryKey())
      .addColumn('subscription_id', 'text', (c) => c.notNull())
      .addColumn('created_at', ts, (c) => c.notNull())
      .execute();
  },
};
