import { nowIso } from '../clock.ts';
import type { Database } from '../db/database.ts';
import type { MailOutboxTable } from '../db/schema.ts';
import { newId } from '../ids.ts';
import { CREDENTIAL_PURPOSES, type MailMessage } from './transport.ts';

export interface OutboxMessage extends MailMessage {
  id: string;
  headers: Record<string, string>;
  createdAt: string;
}

/**
 * The local outbox: mail "sent" without an SMTP server. The only code that touches
 * `mail_outbox`; an embedded install and the tests read their mail here.
 */
export class MailOutboxRepository {
  constructor(private readonly database: Database) {}

  async insert(message: MailMessage): Promise<OutboxMessage> {
    const row: MailOutboxTable = {
      id: newId('mail'),
      recipient: message.to,
      subject: message.subject,
      text_body: message.text,
      html_body: message.html ?? null,
      headers: JSON.stringify(message.headers ?? {}),
      purpose: message.purpose,
      created_at: monotonicNowIso(),
      store_domain: message.storeDomain ?? null,
    };
    await this.database.writeStatement((db) => db.insertInto('mail_outbox').values(row).execute());
    return fromRow(row);
  }

  /** The newest mail to `recipient`, of one purpose when given. */
  async latestFor(recipient: string, purpose?: string): Promise<OutboxMessage | undefined> {
    let query = this.database.db.selectFrom('mail_outbox').selectAll().where('recipient', '=', recipient);
    if (purpose !== undefined) query = query.where('purpose', '=', purpose);
    const row = await query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(1).executeTakeFirst();
    return row && fromRow(row);
  }

  /**
   * A store's mail, newest first, but never a mail that carries a credential (a sign-in link, a
   * claim code): whoever can read a store's outbox must not become its owner by reading it.
   */
  async listForStore(storeDomain: string, limit: number): Promise<OutboxMessage[]> {
    const rows = await this.database.db
      .selectFrom('mail_outbox')
      .selectAll()
      .where('store_domain', '=', storeDomain)
      .where('purpose', 'not in', CREDENTIAL_PURPOSES)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
    return rows.map(fromRow);
  }

  async findForStore(storeDomain: string, id: string): Promise<OutboxMessage | undefined> {
    const row = await this.database.db
      .selectFrom('mail_outbox')
      .selectAll()
      .where('id', '=', id)
      .where('store_domain', '=', storeDomain)
      .where('purpose', 'not in', CREDENTIAL_PURPOSES)
      .executeTakeFirst();
    return row && fromRow(row);
  }

  /** Every mail to `recipient`, oldest first. */
  async listFor(recipient: string): Promise<OutboxMessage[]> {
    const rows = await this.database.db
      .selectFrom('mail_outbox')
      .selectAll()
      .where('recipient', '=', recipient)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map(fromRow);
  }
}

function fromRow(row: MailOutboxTable): OutboxMessage {
  const message: OutboxMessage = {
    id: row.id,
    to: row.recipient,
    subject: row.subject,
    text: row.text_body,
    headers: JSON.parse(row.headers) as Record<string, string>,
    purpose: row.purpose,
    createdAt: row.created_at,
  };
  if (row.store_domain !== null) message.storeDomain = row.store_domain;
  if (row.html_body !== null) message.html = row.html_body;
  return message;
}

let lastCreatedAt = '';

/**
 * Mails written within one millisecond would tie on `created_at`, and the random part of their
 * ids would then decide which is "latest" (a resent code could lose to the one it replaces).
 * Within a process each mail is stamped strictly after the previous one.
 */
function monotonicNowIso(): string {
  let now = nowIso();
  if (now <= lastCreatedAt) now = new Date(Date.parse(lastCreatedAt) + 1).toISOString();
  lastCreatedAt = now;
  return now;
}
