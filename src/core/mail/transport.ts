import type { Database } from '../db/database.ts';
import { MailOutboxRepository } from './outbox-repository.ts';
import { SmtpTransport } from './smtp-transport.ts';

export { MailDeliveryError } from './smtp-transport.ts';

/**
 * Mail whose text is a credential: whoever reads it can act as the recipient. Never listed in a
 * store's outbox (API or dashboard); the operator reads them with `restock dashboard link` or
 * from the database.
 */
export const CREDENTIAL_PURPOSES = ['dashboard-sign-in', 'agent-claim-code', 'plan-confirmation', 'subscription-confirmation'] as const;

/** A From address as the mail library takes it: the name is quoted and escaped by the library, never by us. */
export interface MailAddress {
  name: string;
  address: string;
}

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  html?: string;
  headers?: Record<string, string>;
  /** what the mail is for, e.g. 'agent-claim-code' */
  purpose: string;
  /** The store the mail is sent for, if any (the outbox lists a store's mail to its agents). */
  storeDomain?: string;
  /** Overrides the transport's default From (a store's sender name). */
  from?: MailAddress;
}

export interface MailTransport {
  readonly kind: 'outbox' | 'smtp';
  /** Resolves once the mail is safe: stored in the outbox, or accepted by the SMTP server. */
  send(message: MailMessage): Promise<void>;
  close(): Promise<void>;
}

/**
 * The SMTP server at `smtpUrl` when one is configured (its certificate checked against `ca`
 * when given, SMTP_CA_FILE's); otherwise the local outbox, so an embedded install needs no mail
 * server and its mail can still be read back.
 */
export function openMailTransport(options: { smtpUrl: string | undefined; from: string; database: Database; poolSize?: number; ca?: string | undefined }): MailTransport {
  if (options.smtpUrl) return new SmtpTransport(options.smtpUrl, options.from, { poolSize: options.poolSize, ...(options.ca !== undefined && { ca: options.ca }) });
  return new OutboxTransport(new MailOutboxRepository(options.database));
}

/** Keeps each mail as a row of `mail_outbox`; `send` resolves after the row is committed. */
export class OutboxTransport implements MailTransport {
  readonly kind = 'outbox' as const;

  constructor(private readonly store: MailOutboxRepository) {}

  async send(message: MailMessage): Promise<void> {
    await this.store.insert(message);
  }

  /** The database belongs to the caller, who closes it after the transport. */
  async close(): Promise<void> {}
}
