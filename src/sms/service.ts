import { SmsDeliveryError, type SmsChannel, type SmsMessage } from './channel.ts';
import type { SmsAccount } from './schemas.ts';
import type { SmsOptOutRepository } from './repository.ts';
import type { SmsConfig } from './settings.ts';
import { isWellFormedAccount, loadTwilio, type TwilioApi, type TwilioSdk } from './twilio-client.ts';

/** E.164: a plus, a country code that does not start with 0, at most 15 digits in all. */
export const E164 = /^\+[1-9][0-9]{6,14}$/;
export const MESSAGING_SERVICE_SID = /^MG[0-9a-f]{32}$/;

/** Twilio's codes (https://www.twilio.com/docs/api/errors), as what they say about retrying. */
const UNSUBSCRIBED_RECIPIENT = 21610;
/**
 * About the account or its sender: wrong credentials (20003), an inactive account (20005), a
 * sender the account does not own or cannot text from (21212, 21606, 21659, 21660, 21661), an
 * unknown Messaging Service (21701, 21705). The store or the operator fixes these in their
 * settings; until then the alerts wait for the next attempt instead of being lost.
 */
const ACCOUNT_PROBLEMS = new Set([20003, 20005, 21212, 21606, 21659, 21660, 21661, 21701, 21705]);
const TOO_MANY_REQUESTS = 20429;

export interface SmsServiceDeps {
  sms: SmsConfig;
  baseUrl: string;
  optOuts: SmsOptOutRepository;
  twilio: TwilioApi;
}

/** SMS through Twilio's SDK: sending, the opt-outs phones texted us, and the URLs Twilio calls back. */
export class SmsService implements SmsChannel {
  constructor(private readonly deps: SmsServiceDeps) {}

  accountFor(own: SmsAccount | undefined): SmsAccount | undefined {
    return own ?? this.deps.sms.account;
  }

  async send(account: SmsAccount, message: SmsMessage): Promise<{ providerRef: string }> {
    return this.create(account, message.to, message.body, callbackUrl(message.statusCallback));
  }

  /** The double opt-in text ("reply YES…"); the shopper's YES comes back through the inbound webhook. */
  async requestConfirmation(account: SmsAccount, phone: string, text: string): Promise<{ providerRef: string }> {
    return this.create(account, phone, text, undefined);
  }

  async optedOut(sender: string, phones: string[]): Promise<Set<string>> {
    return this.deps.optOuts.optedOut(sender, phones);
  }

  /**
   * Where Twilio reports a text's delivery: ours for the service's account, the store's own path
   * for its own account, since each account signs with its own auth token.
   */
  statusCallbackUrl(storeDomain: string, ownAccount: boolean, notificationId?: string): string {
    const path = ownAccount ? `/sms/twilio/status/${encodeURIComponent(storeDomain)}` : '/sms/twilio/status';
    return `${this.deps.baseUrl}${path}${notificationId === undefined ? '' : `?alert=${encodeURIComponent(notificationId)}`}`;
  }

  /** What a number's "A message comes in" webhook must be set to: the service's, or a store's own account's. */
  inboundUrl(storeDomain?: string): string {
    return `${this.deps.baseUrl}${storeDomain === undefined ? '/sms/twilio/inbound' : `/sms/twilio/inbound/${encodeURIComponent(storeDomain)}`}`;
  }

  private async create(account: SmsAccount, to: string, body: string, statusCallback: string | undefined): Promise<{ providerRef: string }> {
    if (!E164.test(to)) throw new SmsDeliveryError('The phone number is not in E.164 form (+ and up to 15 digits).', undefined, true, false);
    const sender = senderOf(account);
    const client = await this.deps.twilio.clientFor(account);
    try {
      const created = await client.messages.create({ to, body, ...sender, ...(statusCallback && { statusCallback }) });
      return { providerRef: created.sid };
    } catch (err) {
      throw deliveryError(err, await loadTwilio());
    }
  }
}

/** `from` as Twilio takes it: a number, or the Messaging Service that picks one. */
function senderOf(account: SmsAccount): { from: string } | { messagingServiceSid: string } {
  // A stored account that no longer parses is a setting to fix, not a reason to drop the notification.
  if (!isWellFormedAccount(account)) throw new SmsDeliveryError('The Twilio account is not well formed (Account SID or auth token).', undefined, false, false);
  if (MESSAGING_SERVICE_SID.test(account.from)) return { messagingServiceSid: account.from };
  if (E164.test(account.from)) return { from: account.from };
  throw new SmsDeliveryError('The sender is neither an E.164 number nor a Messaging Service SID.', undefined, false, false);
}

function callbackUrl(url: string): string {
  const parsed = URL.canParse(url) ? new URL(url) : undefined;
  if (!parsed || (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')) throw new Error(`Not a status callback URL: ${url.slice(0, 80)}`);
  return parsed.href;
}

/**
 * What a failed call means for the notification: `permanent` when sending the same text to the same
 * phone again cannot succeed, `optedOut` when the phone stopped this sender (the subscriber
 * must not be texted again until it starts it).
 */
export function deliveryError(err: unknown, twilio: TwilioSdk): SmsDeliveryError {
  if (err instanceof SmsDeliveryError) return err;
  if (err instanceof twilio.RestException) {
    const code = typeof err.code === 'number' ? err.code : undefined;
    const message = `Twilio answered ${err.status}${code === undefined ? '' : ` (error ${code})`}: ${String(err.message ?? '').slice(0, 200)}`;
    if (code === UNSUBSCRIBED_RECIPIENT) return new SmsDeliveryError(message, code, true, true);
    if (err.status === 429 || code === TOO_MANY_REQUESTS || err.status >= 500) return new SmsDeliveryError(message, code, false, false);
    if (code !== undefined && ACCOUNT_PROBLEMS.has(code)) return new SmsDeliveryError(message, code, false, false);
    if (err.status === 401 || err.status === 403) return new SmsDeliveryError(message, code, false, false);
    // Any other refusal is about this phone or this text (21211 invalid number, 21265 a short
    // code, 21408 a region the account may not text, 21608 unverified on a trial account, 21612
    // no route, 21614 not a mobile, 21635 a landline, 21602 no body, 21617 over 1,600
    // characters): the same text to the same phone gets the same answer.
    return new SmsDeliveryError(message, code, true, false);
  }
  if (isNetworkError(err)) {
    return new SmsDeliveryError(`Twilio could not be reached: ${(err as { code?: string }).code ?? 'no answer'}`, undefined, false, false);
  }
  throw err;
}

/** Axios' failures to get an answer at all: refused, reset, timed out, name not found. */
export function isNetworkError(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { isAxiosError?: unknown }).isAxiosError === true;
}
