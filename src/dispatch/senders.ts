import { createHash } from 'node:crypto';
import type { MailTransport } from '../core/mail/transport.ts';
import { SmtpTransport } from '../core/mail/smtp-transport.ts';
import type { EffectiveSettings } from '../stores/settings.ts';

/**
 * Chooses the transport for a store's alerts: its own SMTP server when it set one (pooled, kept
 * open across batches), otherwise the service's (SMTP_URL, or the local outbox).
 */
export class AlertSenders {
  private readonly own = new Map<string, SmtpTransport>();

  constructor(
    private readonly fallback: MailTransport,
    private readonly defaultFrom: string,
    private readonly poolSize: number,
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
      transport = new SmtpTransport(smtpUrl, this.defaultFrom, { poolSize: this.poolSize });
      this.own.set(key, transport);
    }
    return transport;
  }

  /** The From header: the store's sender name on the service's address. */
  fromFor(settings: EffectiveSettings): string | undefined {
    if (!settings.senderName) return undefined;
    const address = /<([^>]+)>/.exec(this.defaultFrom)?.[1] ?? this.defaultFrom;
    return `"${settings.senderName}" <${address}>`;
  }

  async close(): Promise<void> {
    await Promise.all([...this.own.values()].map((transport) => transport.close()));
    this.own.clear();
  }
}
