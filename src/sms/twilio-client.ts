import http from 'node:http';
import https from 'node:https';
import twilio from 'twilio';
import type RequestClient from 'twilio/lib/base/RequestClient.js';
import type { SmsAccount } from './schemas.ts';
import { parseApiOrigin } from './settings.ts';

/** Where the SDK sends the Messages, Accounts and IncomingPhoneNumbers calls. */
export const TWILIO_API_ORIGIN = 'https://api.twilio.com';
/** Where it sends the Messaging Services calls (a store's sender may be one). */
export const TWILIO_MESSAGING_ORIGIN = 'https://messaging.twilio.com';
/** Twilio's origins the SDK is used with; a configured origin stands in for them all (their paths do not overlap). */
const TWILIO_ORIGINS = [TWILIO_API_ORIGIN, TWILIO_MESSAGING_ORIGIN];

const ACCOUNT_SID = /^AC[0-9a-f]{32}$/;
const AUTH_TOKEN = /^[0-9a-f]{32}$/;

export interface TwilioHttpOptions {
  /** `config.channels.sms.apiUrl`: Twilio's origin, or a stand-in's. */
  apiUrl: string;
  /** Longest a call may take, connection included. */
  timeoutMs: number;
}

/**
 * The SDK's own HTTP client (it builds, signs and parses every call), with two changes: calls
 * for Twilio's origins go to the configured one when that differs (a stand-in in tests or
 * staging), and its connection pools are ours to close, so a stopped process leaves no socket.
 * Every call is bounded by `timeoutMs`, the socket's idle time and the request's whole life.
 */
export class TwilioHttpClient extends twilio.RequestClient {
  private readonly origin: string | undefined;
  private readonly agents: Array<http.Agent | https.Agent>;

  constructor(options: TwilioHttpOptions) {
    super({ timeout: options.timeoutMs, keepAlive: true });
    const target = parseApiOrigin(options.apiUrl);
    this.origin = target === TWILIO_API_ORIGIN ? undefined : target;
    // A stand-in may listen on plain HTTP, which the SDK's https agent does not serve; that
    // pool is ours too, or its kept-alive sockets would outlive the feature.
    const plain = new http.Agent({ keepAlive: true, timeout: options.timeoutMs, maxSockets: 20 });
    this.axios.defaults.httpAgent = plain;
    this.agents = [plain, this.axios.defaults.httpsAgent as https.Agent];
  }

  override request<TData>(opts: RequestClient.RequestOptions<TData>) {
    return super.request({ ...opts, uri: this.rewritten(opts.uri) });
  }

  private rewritten(uri: string): string {
    if (this.origin === undefined) return uri;
    const twilioOrigin = TWILIO_ORIGINS.find((origin) => uri === origin || uri.startsWith(`${origin}/`));
    return twilioOrigin === undefined ? uri : this.origin + uri.slice(twilioOrigin.length);
  }

  close(): void {
    for (const agent of this.agents) agent.destroy();
  }
}

/** Whether an account is one the SDK may be handed: its SID and token as Twilio issues them. */
export function isWellFormedAccount(account: SmsAccount): boolean {
  return ACCOUNT_SID.test(account.accountSid) && AUTH_TOKEN.test(account.authToken);
}

/** An SDK client acting for one account, over the shared HTTP client. Cheap: the SDK loads its API domains lazily. */
export function twilioClientFor(account: SmsAccount, httpClient: TwilioHttpClient): twilio.Twilio {
  if (!isWellFormedAccount(account)) throw new Error('A Twilio account needs an Account SID (AC…) and a 32-hex-digit auth token.');
  // No automatic retry of a 429: the dispatch worker retries with its own backoff and lease.
  return twilio(account.accountSid, account.authToken, { httpClient, autoRetry: false });
}
