import type { Database } from '../core/db/database.ts';
import type { DashboardSessionsTable, DashboardSignInLinksTable } from '../core/db/schema.ts';

/** Sign-in links and sessions of the merchant dashboard; the only code that touches their tables. */
export class DashboardRepository {
  constructor(private readonly database: Database) {}

  async insertLink(row: DashboardSignInLinksTable): Promise<void> {
    await this.database.writeStatement((db) => db.insertInto('dashboard_sign_in_links').values(row).execute());
  }

  /** Links made for a store since `since` (used or not): how many mails its owner was sent. */
  async linksSince(shop: string, since: string): Promise<number> {
    const row = await this.database.db
      .selectFrom('dashboard_sign_in_links')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('shop', '=', shop)
      .where('created_at', '>', since)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  findLink(tokenHash: string): Promise<DashboardSignInLinksTable | undefined> {
    return this.database.db.selectFrom('dashboard_sign_in_links').selectAll().where('token_hash', '=', tokenHash).executeTakeFirst();
  }

  /**
   * Marks an unused, unexpired link used and returns it; one conditional update, so two tabs
   * posting the same link at once sign in once.
   */
  async useLink(tokenHash: string, now: string): Promise<DashboardSignInLinksTable | undefined> {
    const result = await this.database.writeStatement((db) =>
      db
        .updateTable('dashboard_sign_in_links')
        .set({ used_at: now })
        .where('token_hash', '=', tokenHash)
        .where('used_at', 'is', null)
        .where('expires_at', '>', now)
        .executeTakeFirst(),
    );
    if (Number(result.numUpdatedRows) !== 1) return undefined;
    return this.findLink(tokenHash);
  }

  async insertSession(row: DashboardSessionsTable): Promise<void> {
    await this.database.writeStatement((db) => db.insertInto('dashboard_sessions').values(row).execute());
  }

  liveSession(idHash: string, now: string): Promise<DashboardSessionsTable | undefined> {
    return this.database.db
      .selectFrom('dashboard_sessions')
      .selectAll()
      .where('id_hash', '=', idHash)
      .where('ended_at', 'is', null)
      .where('expires_at', '>', now)
      .executeTakeFirst();
  }

  async endSession(idHash: string, now: string): Promise<void> {
    await this.database.writeStatement((db) =>
      db.updateTable('dashboard_sessions').set({ ended_at: now }).where('id_hash', '=', idHash).where('ended_at', 'is', null).execute(),
    );
  }

  /** The store changed hands: every live session ends and every unused link stops working, in one transaction. */
  endAccessTo(shop: string, now: string): Promise<number> {
    return this.database.write(async (trx) => {
      const sessions = await trx.updateTable('dashboard_sessions').set({ ended_at: now }).where('shop', '=', shop).where('ended_at', 'is', null).executeTakeFirst();
      const links = await trx.updateTable('dashboard_sign_in_links').set({ used_at: now }).where('shop', '=', shop).where('used_at', 'is', null).executeTakeFirst();
      return Number(sessions.numUpdatedRows) + Number(links.numUpdatedRows);
    });
  }

  /** Drops expired links and sessions; they can no longer sign anyone in. */
  async sweep(now: string): Promise<void> {
    await this.database.writeStatement((db) => db.deleteFrom('dashboard_sign_in_links').where('expires_at', '<=', now).execute());
    await this.database.writeStatement((db) => db.deleteFrom('dashboard_sessions').where('expires_at', '<=', now).execute());
  }
}
