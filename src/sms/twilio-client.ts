import type twilio from 'twilio';
import type { SmsAccount } from './schemas.ts';
import type { TwilioHttpClient, TwilioHttpOptions } from './twilio-http.ts';

const ACCOUNT_SID = /^AC[0-9a-f]{32}$/;
const AUTH_TOKEN = /^[0-9a-f]{32}$/;

export type TwilioSdk = typeof twilio;

/** Twilio's SDK, loaded by the first caller that needs it (a text, a webhook, an account check). */
export async function loadTwilio(): Promise<TwilioSdk> {
  return (await import('./twilio-http.ts')).twilio;
}

/**
 * Twilio's SDK over one HTTP client (twilio-http.ts), both made at the first call: a process
 * that never texts never loads them. `close` ends the client's connections, if it was made.
 */
export class TwilioApi {
  private loaded: Promise<{ sdk: TwilioSdk; http: TwilioHttpClient }> | undefined;

  constructor(private readonly options: TwilioHttpOptions) {}

  /** The SDK and the client, made once. */
  private load() {
    return (this.loaded ??= import('./twilio-http.ts').then(({ twilio, TwilioHttpClient }) => ({ sdk: twilio, http: new TwilioHttpClient(this.options) })));
  }

  /** An SDK client acting for one account. Cheap: the SDK loads its API domains lazily. */
  async clientFor(account: SmsAccount): Promise<twilio.Twilio> {
    if (!isWellFormedAccount(account)) throw new Error('A Twilio account needs an Account SID (AC…) and a 32-hex-digit auth token.');
    const { sdk, http } = await this.load();
    // No automatic retry of a 429: the dispatch worker retries with its own backoff and lease.
    return sdk(account.accountSid, account.authToken, { httpClient: http, autoRetry: false });
  }

  async close(): Promise<void> {
    if (this.loaded) (await this.loaded).http.close();
  }
}

/** Whether an account is one the SDK may be handed: its SID and token as Twilio issues them. */
export function isWellFormedAccount(account: SmsAccount): boolean {
  return ACCOUNT_SID.test(account.accountSid) && AUTH_TOKEN.test(account.authToken);
}
