import { randomBytes, timingSafeEqual } from 'node:crypto';
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
  const { value } = await keepServiceSecret(database, 'link-signing', () => randomBytes(32).toString('base64url'));
  return Buffer.from(value, 'base64url');
}

/**
 * A secret made once and kept under `name` in `service_secrets`: inserting with "on conflict do
 * nothing" and then reading gives every process that shares the database the same value,
 * however many start together. `made` says whether this call's value was the one kept. A secret
 * already kept is only read: every start asks for several, and a write is a sync of the disk.
 */
export async function keepServiceSecret(database: Database, name: string, make: () => string): Promise<{ value: string; made: boolean }> {
  const kept = await readServiceSecret(database, name);
  if (kept !== undefined) return { value: kept, made: false };
  const fresh = make();
  await database.write((trx) =>
    trx
      .insertInto('service_secrets')
      .values({ name, value: fresh, created_at: nowIso() })
      .onConflict((oc) => oc.column('name').doNothing())
      .execute(),
  );
  const value = await readServiceSecret(database, name);
  if (value === undefined) throw new Error(`The service secret '${name}' was neither kept nor found.`);
  return { value, made: value === fresh };
}

async function readServiceSecret(database: Database, name: string): Promise<string | undefined> {
  const row = await database.db.selectFrom('service_secrets').select('value').where('name', '=', name).executeTakeFirst();
  return row?.value;
}

/** Puts `value` under `name` in place of what was kept there (an operator importing a key). */
export async function replaceServiceSecret(database: Database, name: string, value: string): Promise<void> {
  await database.write((trx) =>
    trx
      .insertInto('service_secrets')
      .values({ name, value, created_at: nowIso() })
      .onConflict((oc) => oc.column('name').doUpdateSet({ value, created_at: nowIso() }))
      .execute(),
  );
}

/** Whether a secret someone presented is the one expected, in time that does not tell how much of it matched. */
export function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
