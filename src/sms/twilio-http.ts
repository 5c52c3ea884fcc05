import http from 'node:http';
import https from 'node:https';
import twilio from 'twilio';
import type RequestClient from 'twilio/lib/base/RequestClient.js';
import { parseApiOrigin } from './settings.ts';

// Imported only by twilio-client.ts, when a process first calls Twilio: the SDK (and axios under
// it) is a fifth of a start, and most processes never text.

/** Where the SDK sends the Messages, Accounts and IncomingPhoneNumbers calls. */
const TWILIO_API_ORIGIN = 'https://api.twilio.com';
/** Where it sends the Messaging Services calls (a store's sender may be one). */
const TWILIO_MESSAGING_ORIGIN = 'https://messaging.twilio.com';
/** Twilio's origins the SDK is used with; a configured origin stands in for them all (their paths do not overlap). */
const TWILIO_ORIGINS = [TWILIO_API_ORIGIN, TWILIO_MESSAGING_ORIGIN];

export { twilio };

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
