import { z } from 'zod';
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

export type SmsSettings = z.infer<z.ZodObject<typeof smsSettings>>;

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

/** The SMS (Twilio) settings: this module's slice of the environment, which src/config.ts reads with the rest. */
export const smsSettings = {
  TWILIO_ACCOUNT_SID: z.string().regex(/^AC[0-9a-f]{32}$/, 'a Twilio Account SID (AC and 32 hex digits)').optional().describe("SMS: the service's own Twilio account, with `TWILIO_AUTH_TOKEN` and `TWILIO_FROM` (all three, or none: then only stores with their own account text); see docs/sms.md"),
  TWILIO_AUTH_TOKEN: z.string().regex(/^[0-9a-f]{32}$/, 'a Twilio auth token (32 hex digits)').optional().describe("SMS: the service's own Twilio account's auth token"),
  TWILIO_FROM: z.string().regex(/^(\+[1-9][0-9]{6,14}|MG[0-9a-f]{32})$/, 'an E.164 number or a Messaging Service SID').optional().describe("SMS: the service's own sender, an E.164 number or a Messaging Service SID"),
  TWILIO_API_URL: z.url().refine(isApiOrigin, 'an http(s) origin, without credentials, path or query').default('https://api.twilio.com').describe("Twilio's REST API, an origin only; only a test stand-in changes it"),
};
