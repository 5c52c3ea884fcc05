import type { SmsAccount } from './schemas.ts';

/** SMS from the TWILIO_* settings (src/config.ts reads them). */
export interface SmsConfig {
  /** The service's own Twilio account and sender; undefined: only stores with their own account can text. */
  account: SmsAccount | undefined;
  /** Twilio's REST API origin; only a test or a staging stand-in changes it. */
  apiUrl: string;
  /** Longest one call to Twilio may take, connecting included; a send that runs out is retried later. */
  timeoutMs: number;
}

/** Twilio answers a send in well under a second; ten leave room for a slow network without holding a worker's lease. */
export const DEFAULT_SMS_TIMEOUT_MS = 10_000;

export interface SmsSettings {
  TWILIO_ACCOUNT_SID?: string;
  TWILIO_AUTH_TOKEN?: string;
  TWILIO_FROM?: string;
  TWILIO_API_URL: string;
}

export function smsConfig(e: SmsSettings): SmsConfig {
  const { TWILIO_ACCOUNT_SID: accountSid, TWILIO_AUTH_TOKEN: authToken, TWILIO_FROM: from } = e;
  const account = accountSid && authToken && from ? { accountSid, authToken, from } : undefined;
  return { account, apiUrl: parseApiOrigin(e.TWILIO_API_URL), timeoutMs: DEFAULT_SMS_TIMEOUT_MS };
}

/** The setting as an origin (scheme, host, port), refusing anything a REST base URL cannot be. */
export function parseApiOrigin(apiUrl: string): string {
  let url: URL;
  try {
    url = new URL(apiUrl);
  } catch {
    throw new Error('TWILIO_API_URL is not a URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error('TWILIO_API_URL must be an http:// or https:// URL');
  if (url.username || url.password) throw new Error('TWILIO_API_URL must not carry credentials');
  if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) throw new Error('TWILIO_API_URL must be an origin, without a path or query');
  return url.origin;
}

/** For the settings schema: a URL parseApiOrigin takes. */
export function isApiOrigin(text: string): boolean {
  try {
    parseApiOrigin(text);
    return true;
  } catch {
    return false;
  }
}
