import { sql, type Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/** Stores and their owners, agents and their credentials, signing keys, and the mail outbox. */
export const identity: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);

    await db.schema
      .createTable('stores')
      .addColumn('domain', 'text', (c) => c.primaryKey())
      .addColumn('owner_email', 'text', (c) => c.notNull())
      .addColumn('created_at', ts, (c) => c.notNull())
      .addColumn('updated_at', ts, (c) => c.notNull())
      .execute();

    await db.schema
      .createTable('agents')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('method', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('credential_type', 'text', (c) => c.notNull())
      .addColumn('scopes', 'text', (c) => c.notNull())
      .addColumn('post_claim_scopes', 'text', (c) => c.notNull())
      .addColumn('email', 'text')
      .addColumn('issuer', 'text')
      .addColumn('subject', 'text')
      .addColumn('store_domain', 'text')
      .addColumn('cert_thumbprint', 'text')
      .addColumn('claim_token_hash', 'text')
      .addColumn('claim_expires_at', ts)
      .addColumn('claim_codes_sent', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('created_at', ts, (c) => c.notNull())
      .addColumn('claimed_at', ts)
      .addColumn('revoked_at', ts)
      .execute();
    await db.schema.createIndex('agents_by_claim_token').on('agents').column('claim_token_hash').unique().execute();
    await db.schema.createIndex('agents_by_store').on('agents').columns(['store_domain', 'created_at']).execute();

    await db.schema
      .createTable('agent_claim_attempts')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('agent_id', 'text', (c) => c.notNull())
      .addColumn('email', 'text', (c) => c.notNull())
      .addColumn('store_domain', 'text')
      .addColumn('otp_hash', 'text', (c) => c.notNull())
      .addColumn('failed_attempts', 'integer', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('created_at', ts, (c) => c.notNull())
      .addColumn('expires_at', ts, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex('agent_claim_attempts_by_agent')
      .on('agent_claim_attempts')
      .columns(['agent_id', 'created_at'])
      .execute();

    // Revoked access tokens, kept until they would have expired anyway.
    await db.schema
      .createTable('revoked_tokens')
      .addColumn('jti', 'text', (c) => c.primaryKey())
      .addColumn('agent_id', 'text', (c) => c.notNull())
      .addColumn('revoked_at', ts, (c) => c.notNull())
      .addColumn('expires_at', ts, (c) => c.notNull())
      .execute();

    // Identity assertions are single-use: each (issuer, jti) is remembered until it expires.
    await db.schema
      .createTable('used_assertions')
      .addColumn('issuer', 'text', (c) => c.notNull())
      .addColumn('jti', 'text', (c) => c.notNull())
      .addColumn('expires_at', ts, (c) => c.notNull())
      .addPrimaryKeyConstraint('used_assertions_pk', ['issuer', 'jti'])
      .execute();

    await db.schema
      .createTable('signing_keys')
      .addColumn('kid', 'text', (c) => c.primaryKey())
      .addColumn('private_jwk', 'text', (c) => c.notNull())
      .addColumn('public_jwk', 'text', (c) => c.notNull())
      .addColumn('created_at', ts, (c) => c.notNull())
      .addColumn('retired_at', ts)
      .execute();

    await db.schema
      .createTable('mail_outbox')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('recipient', 'text', (c) => c.notNull())
      .addColumn('subject', 'text', (c) => c.notNull())
      .addColumn('text_body', 'text', (c) => c.notNull())
      .addColumn('html_body', 'text')
      .addColumn('headers', 'text', (c) => c.notNull())
      .addColumn('purpose', 'text', (c) => c.notNull())
      .addColumn('created_at', ts, (c) => c.notNull())
      .execute();
    await db.schema.createIndex('mail_outbox_by_recipient').on('mail_outbox').columns(['recipient', 'created_at']).execute();

    // Who may see a subscription or checkout session: the agent that made it, and agents bound
    // to its store.
    await db.schema.alterTable('subscriptions').addColumn('store_domain', 'text').execute();
    await db.schema.alterTable('subscriptions').addColumn('agent_id', 'text').execute();
    // One live subscription per (product, variant, e-mail) and owner: its store, else the agent
    // that made it. A global one would hand one store's subscription to another store's agent.
    await sql`drop index subscriptions_one_live`.execute(db);
    await sql`create unique index subscriptions_one_live
      on subscriptions (product_id, coalesce(variant_id, ''), email, coalesce(store_domain, agent_id, ''))
      where status = 'active'`.execute(db);
    await db.schema.alterTable('checkout_sessions').addColumn('agent_id', 'text').execute();
  },
};
