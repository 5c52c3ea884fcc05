import { Problem, ValidationFailed } from '../core/problems.ts';
import type { SmsAccount } from './schemas.ts';
import type { SmsConfig } from './settings.ts';
import { isNetworkError, MESSAGING_SERVICE_SID } from './service.ts';
import { loadTwilio, TwilioApi, type TwilioSdk } from './twilio-client.ts';

/** Twilio's "the requested resource was not found": https://www.twilio.com/docs/api/errors/20404 */
const NOT_FOUND = 20404;

/**
 * Asks Twilio whether an account a store gives is one it holds, and the sender one of that
 * account's, before the store may save it: a store's webhooks are verified with the token it
 * saved and may act on its sender, so both must be Twilio's word, not the store's.
 *
 * - The Account: GET /2010-04-01/Accounts/{AccountSid}.json with the SID and token as Basic auth
 *   (https://www.twilio.com/docs/iam/api/account); a wrong pair is 401, error 20003. Only an
 *   `active` account can text.
 * - A number: the account's IncomingPhoneNumbers filtered by PhoneNumber
 *   (https://www.twilio.com/docs/phone-numbers/api/incomingphonenumber-resource); the filter
 *   matches partial numbers too, so only an exact `phone_number` counts.
 * - A Messaging Service: GET https://messaging.twilio.com/v1/Services/{Sid}
 *   (https://www.twilio.com/docs/messaging/api/service-resource), 404 (20404) when the account
 *   has none by that SID.
 *
 * A refusal is a ValidationFailed naming the field under `/body/smsSender`; Twilio out of reach
 * (no answer, 429, 5xx) is 502 upstream-failed. Either way nothing is saved. One HTTP client per
 * check, closed after it: saving a sender is rare, and no socket outlives the request.
 */
export function twilioAccountCheck(sms: SmsConfig): (account: SmsAccount) => Promise<void> {
  return async (account) => {
    if (sms.account && account.from === sms.account.from) {
      throw refused('/body/smsSender/from', "is the service's own sender: set smsSender to null to text from it");
    }
    const api = new TwilioApi({ apiUrl: sms.apiUrl, timeoutMs: sms.timeoutMs });
    try {
      const client = await api.clientFor(account);
      const sdk = await loadTwilio();
      const found = await asked(sdk, () => client.api.v2010.accounts(account.accountSid).fetch(), '/body/smsSender');
      if (found.status !== 'active') throw refused('/body/smsSender/accountSid', `is ${found.status} at Twilio: only an active account can text`);
      if (MESSAGING_SERVICE_SID.test(account.from)) {
        await asked(sdk, () => client.messaging.v1.services(account.from).fetch(), '/body/smsSender/from', 'is no Messaging Service of this Twilio account');
      } else {
        const numbers = await asked(sdk, () => client.incomingPhoneNumbers.list({ phoneNumber: account.from, limit: 20 }), '/body/smsSender/from');
        if (!numbers.some((number) => number.phoneNumber === account.from)) throw refused('/body/smsSender/from', 'is no phone number of this Twilio account');
      }
    } finally {
      await api.close();
    }
  };
}

/** One call to Twilio, its refusal said as a problem on `pointer` (`notFound` for 20404). */
async function asked<T>(twilio: TwilioSdk, call: () => Promise<T>, pointer: string, notFound?: string): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (err instanceof twilio.RestException) {
      const code = typeof err.code === 'number' ? err.code : undefined;
      if (err.status === 429 || err.status >= 500) throw unreachable(`Twilio answered ${err.status}`);
      if (code === NOT_FOUND && notFound !== undefined) throw refused(pointer, notFound);
      if (err.status === 401) throw refused('/body/smsSender', 'Twilio does not know this Account SID and auth token (error 20003)');
      const said = String(err.message ?? '').slice(0, 200);
      throw refused(pointer, `was refused by Twilio (${err.status}${code === undefined ? '' : `, error ${code}`}${said ? `: ${said}` : ''})`);
    }
    if (isNetworkError(err)) {
      throw unreachable(`Twilio could not be reached (${(err as { code?: string }).code ?? 'no answer'})`);
    }
    throw err;
  }
}

function refused(pointer: string, message: string): ValidationFailed {
  return new ValidationFailed([{ pointer, message }]);
}

function unreachable(why: string): Problem {
  return new Problem('upstream-failed', `${why}, so the Twilio account could not be verified. Nothing was saved; try again later.`);
}
