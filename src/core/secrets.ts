import { randomBytes } from 'node:crypto';
import { nowIso } from './clock.ts';
import type { Database } from './db/database.ts';

/**
 * The service secret that signs links sent to people (unsubscribe, and later claims and
 * checkouts). Taken from RESTOCK_SECRET when set; otherwise generated once and kept in the
 * database, so every process sharing the database signs and verifies alike and links stay
 * valid across restarts.
 */
export async function loadServiceSecret(database: Database, fromEnv: string | undefined): Promise<Buffer> {
  if (fromEnv) return Buffer.from(fromEnv, 'utf8');
  const name = 'link-signing';
  await database.write((trx) =>
    trx
      .insertInto('service_secrets')
      .values({ name, value: randomBytes(32).toString('base64url'), created_at: nowIso() })
      .onConflict((oc) => oc.column('name').doNothing())
      .execute(),
  );
  const row = await database.db
    .selectFrom('service_secrets')
    .select('value')
    .where('name', '=', name)
    .executeTakeFirstOrThrow();
  return Buffer.from(row.value, 'base64url');
}
