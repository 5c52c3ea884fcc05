import type { Kysely } from 'kysely';
import type { DialectMigration } from './index.ts';

/**
 * An agent bound to no store lists its own subscriptions (MCP's `resources/list`, a page at a
 * time in id order): without this index that read walks every store's subscriptions.
 */
export const subscriptionsByAgent: DialectMigration = {
  async up(db: Kysely<any>) {
    await db.schema.createIndex('subscriptions_by_agent').on('subscriptions').columns(['agent_id', 'id']).execute();
  },
};
