import type { Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * Only a store's owner changes its plan. A checkout started by anyone else is a proposal
 * (`status` `awaiting_owner`) until the owner accepts it; the owner's key (its SHA-256 only) and
 * the owner it was made for let the hosted page tell the owner from whoever else holds the URL.
 * `accepted_at` is when the owner chose the purchase (at once for their own checkouts), which the
 * plan states read: a lower plan replaces the one in force only when the owner chose it. A
 * proposal paid per request (MPP) that the owner declines or lets expire is refunded once
 * (`refunded_at`).
 *
 * Sessions made before this migration keep `accepted_at` null: who started them is not known,
 * so none of them counts as the owner's choice.
 */
export const planAcceptance: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);
    await db.schema.alterTable('checkout_sessions').addColumn('accepted_at', ts).execute();
    await db.schema.alterTable('checkout_sessions').addColumn('owner_key_hash', 'text').execute();
    await db.schema.alterTable('checkout_sessions').addColumn('owner_email', 'text').execute();
    await db.schema.alterTable('checkout_sessions').addColumn('proposal_mailed_at', ts).execute();
    await db.schema.alterTable('checkout_sessions').addColumn('refunded_at', ts).execute();
    // How many proposals reached a store's owner in the last hour, asked at every proposal.
    await db.schema.createIndex('checkout_sessions_proposals').on('checkout_sessions').columns(['shop', 'proposal_mailed_at']).execute();
    // Paid proposals not yet refunded, which the worker looks through for declined and expired ones.
    await db.schema.createIndex('checkout_sessions_unrefunded').on('checkout_sessions').columns(['provider', 'refunded_at']).execute();
  },
};
