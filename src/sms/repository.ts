import { chunks } from '../core/chunks.ts';
import type { Database } from '../core/db/database.ts';

/**
 * `sms_opt_outs`: which phones asked a sender (a number, or a Messaging Service, whose opt-outs
 * cover every number in it) to stop, until they asked it to start again. The only code that
 * touches that table.
 */
export class SmsOptOutRepository {
  constructor(private readonly database: Database) {}

  /** The phone stopped these senders; a second STOP keeps the first one's time. */
  async record(senders: string[], phone: string, at: string): Promise<void> {
    if (senders.length === 0) return;
    await this.database.writeStatement((db) =>
      db
        .insertInto('sms_opt_outs')
        .values(senders.map((sender) => ({ sender, phone, created_at: at })))
        .onConflict((oc) => oc.doNothing())
        .execute(),
    );
  }

  /** The phone opted back in to these senders; the number of opt-outs it ended. */
  async remove(senders: string[], phone: string): Promise<number> {
    if (senders.length === 0) return 0;
    const result = await this.database.writeStatement((db) => db.deleteFrom('sms_opt_outs').where('sender', 'in', senders).where('phone', '=', phone).executeTakeFirst());
    return Number(result.numDeletedRows);
  }

  /** Of these phones, those that stopped this sender. */
  async optedOut(sender: string, phones: string[]): Promise<Set<string>> {
    const stopped = new Set<string>();
    for (const chunk of chunks([...new Set(phones)])) {
      const rows = await this.database.db.selectFrom('sms_opt_outs').select('phone').where('sender', '=', sender).where('phone', 'in', chunk).execute();
      for (const row of rows) stopped.add(row.phone);
    }
    return stopped;
  }
}
