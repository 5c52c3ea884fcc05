import { createHash } from 'node:crypto';
import type { OutboundPolicy } from '../core/net/outbound-guard.ts';
import { MailDeliveryError, type MailAddress, type MailMessage, type MailTransport } from '../core/mail/transport.ts';
import { SmtpTransport } from '../core/mail/smtp-transport.ts';
import { SmtpUrlError } from '../core/mail/smtp-url.ts';
import type { EffectiveSettings } from '../stores/schemas.ts';

/**
 * Chooses the transport for a store's alerts: its own SMTP server when it set one (pooled, kept
 * open across batches), otherwise the service's (SMTP_URL, or the local outbox).
 */
export class NotificationSenders {
  private readonly own = new Map<string, MailTransport>();

  constructor(
    private readonly fallback: MailTransport,
    private readonly defaultFrom: string,
    private readonly poolSize: number,
    /** Where a store's own server may be: never an internal address unless the operator allows it. */
    private readonly tenantOutbound: OutboundPolicy,
  ) {}

  /** `smtpUrl`: the store's own server, from its sending profile. */
  transportFor(storeDomain: string, smtpUrl: string | undefined): MailTransport {
    if (!smtpUrl) return this.fallback;
    // Keyed by a digest, so a changed URL (new password) opens a new pool.
    const key = `${storeDomain}\n${createHash('sha256').update(smtpUrl).digest('hex')}`;
    let transport = this.own.get(key);
    if (!transport) {
      for (const [other, stale] of this.own) {
        if (other.startsWith(`${storeDomain}\n`)) {
          this.own.delete(other);
          void stale.close();
        }
      }
      transport = this.openOwn(smtpUrl);
      this.own.set(key, transport);
    }
    return transport;
  }

  /**
   * A URL stored before the settings checked it as the transport reads it can still be refused
   * here; its store's alerts then fail with the reason instead of stopping everyone's batch.
   */
  private openOwn(smtpUrl: string): MailTransport {
    try {
      return new SmtpTransport(smtpUrl, this.defaultFrom, { poolSize: this.poolSize, tenant: this.tenantOutbound });
    } catch (err) {
      if (!(err instanceof SmtpUrlError)) throw err;
      return new RefusedTransport(`the store's SMTP URL is refused: ${err.message}`);
    }
  }

  /**
   * The From header: the store's sender name on the service's address, as an address object, so
   * the mail library quotes and escapes the name (a name ending in a backslash once closed the
   * quotes early and broke the header).
   */
  fromFor(settings: EffectiveSettings): MailAddress | undefined {
    if (!settings.senderName) return undefined;
    const address = /<([^>]+)>/.exec(this.defaultFrom)?.[1] ?? this.defaultFrom;
    return { name: settings.senderName, address: address.trim() };
  }

  async close(): Promise<void> {
    await Promise.all([...this.own.values()].map((transport) => transport.close()));
    this.own.clear();
  }
}

/** Stands for a store's mail server whose URL cannot be used: every send fails with why. */
class RefusedTransport implements MailTransport {
  readonly kind = 'smtp' as const;

  constructor(private readonly why: string) {}

  async send(_message: MailMessage): Promise<void> {
    throw new MailDeliveryError(this.why);
  }

  async close(): Promise<void> {}
}
