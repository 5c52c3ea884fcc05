// Longer than most files on purpose: the SMS feature whole, from segment arithmetic to Twilio's
// signed webhooks, through the official SDK against a stand-in of Twilio's API, on both databases.
/**
 * SMS through Twilio. The texts' arithmetic and wording are checked on their own; sending goes
 * through the `twilio` SDK to the stand-in (test/fixtures/twilio-stand-in.ts), which answers as
 * Twilio's API does and signs its webhooks with its own implementation of Twilio's algorithm, so
 * the SDK's validation is checked against an independent one. The webhooks run on a bare
 * Fastify app with the project's error handling, over a real database of each dialect; the
 * subscriptions and the ledger they report to are stood in for by recorders (their real
 * wiring is the app's).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import type { Config } from '../src/config.ts';
import { Database } from '../src/core/db/database.ts';
import { installErrorHandling } from '../src/core/http/errors.ts';
import { Problem, ValidationFailed } from '../src/core/problems.ts';
import { SmsDeliveryError } from '../src/sms/channel.ts';
import type { SmsAccount } from '../src/sms/schemas.ts';
import { twilioAccountCheck } from '../src/sms/account-check.ts';
import type { DeliveryReport } from '../src/core/channels.ts';
import { buildSms, type DeliveryReports, type SmsConsent, type SmsService } from '../src/sms/feature.ts';
import { classifyInbound } from '../src/sms/keywords.ts';
import { composeNotificationText, composeConfirmationText, composeConfirmedText, countSegments, helpText, type SmsLocale } from '../src/sms/text.ts';
import type { SendingProfile } from '../src/stores/service.ts';
import { expectProblem } from './fixtures/agents.ts';
import { createTestDatabase, dialectSkip, tableDigests, testConfig, testDialects, type TestDatabase } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { freePort } from './fixtures/network.ts';
import { after, before, describe, it } from './fixtures/suites.ts';
import { startTwilioStandIn, twilioSignature, type TwilioStandIn } from './fixtures/twilio-stand-in.ts';

failOnLeakedHandles();

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

/** The service's account: one number. */
const SERVICE: SmsAccount = { accountSid: `AC${hex(16)}`, authToken: hex(16), from: '+15005550006' };
/** A store's own account, texting through a Messaging Service of one number. */
const OWN_SERVICE_SID = `MG${hex(16)}`;
const OWN_NUMBER = '+15005550007';
const OWN: SmsAccount = { accountSid: `AC${hex(16)}`, authToken: hex(16), from: OWN_SERVICE_SID };
/** Another store's own account and number. */
const ELSEWHERE: SmsAccount = { accountSid: `AC${hex(16)}`, authToken: hex(16), from: '+15005550008' };

const STAND_IN_ACCOUNTS = [
  { accountSid: SERVICE.accountSid, authToken: SERVICE.authToken, numbers: [SERVICE.from] },
  { accountSid: OWN.accountSid, authToken: OWN.authToken, numbers: [], messagingServices: { [OWN_SERVICE_SID]: [OWN_NUMBER] } },
  { accountSid: ELSEWHERE.accountSid, authToken: ELSEWHERE.authToken, numbers: [ELSEWHERE.from] },
];

let serial = 0;
/** A phone of its own per test (the +1 555 01xx fictional range, then more digits). */
const uniquePhone = () => `+1555${String(1_000_000 + ++serial).slice(1)}${Math.floor(Math.random() * 10)}`;
/** A ledger id as dispatch makes them, for the callback URL. */
const alertId = () => `ntf_${randomBytes(13).toString('hex')}`;

const gsm = (text: string) => countSegments(text).encoding === 'GSM-7';

describe('segments', () => {
  const table: Array<[string, string, { encoding: 'GSM-7' | 'UCS-2'; units: number; segments: number }]> = [
    ['160 GSM-7 characters are one segment', 'a'.repeat(160), { encoding: 'GSM-7', units: 160, segments: 1 }],
    ['161 are two', 'a'.repeat(161), { encoding: 'GSM-7', units: 161, segments: 2 }],
    ['306 are two parts of 153', 'a'.repeat(306), { encoding: 'GSM-7', units: 306, segments: 2 }],
    ['307 are three', 'a'.repeat(307), { encoding: 'GSM-7', units: 307, segments: 3 }],
    ['accented letters of the basic table stay GSM-7', 'é'.repeat(160), { encoding: 'GSM-7', units: 160, segments: 1 }],
    ['extension characters take two septets', '€'.repeat(80), { encoding: 'GSM-7', units: 160, segments: 1 }],
    ['one more extension character is two segments', '€'.repeat(81), { encoding: 'GSM-7', units: 162, segments: 2 }],
    ['an escaped character is never split across parts', `${'a'.repeat(152)}€${'a'.repeat(152)}`, { encoding: 'GSM-7', units: 306, segments: 3 }],
    ['one character outside GSM-7 makes the text UCS-2', `${'a'.repeat(69)}á`, { encoding: 'UCS-2', units: 70, segments: 1 }],
    ['71 UCS-2 characters are two segments', 'á'.repeat(71), { encoding: 'UCS-2', units: 71, segments: 2 }],
    ['134 are two parts of 67', 'á'.repeat(134), { encoding: 'UCS-2', units: 134, segments: 2 }],
    ['135 are three', 'á'.repeat(135), { encoding: 'UCS-2', units: 135, segments: 3 }],
    ['an emoji takes two UCS-2 units', '😀'.repeat(35), { encoding: 'UCS-2', units: 70, segments: 1 }],
    ['a surrogate pair is never split across parts', '😀'.repeat(67), { encoding: 'UCS-2', units: 134, segments: 3 }],
    ['ç is not GSM-7 (its table has only Ç)', 'ç', { encoding: 'UCS-2', units: 1, segments: 1 }],
  ];
  for (const [name, text, expected] of table) {
    it(name, () => assert.deepEqual(countSegments(text), expected, `${name}: ${text.slice(0, 20)}…`));
  }
});

describe('texts', () => {
  const LINK = 'https://restock.example/c/aB3dE5fG7hJ9kL1m';
  const locales: SmsLocale[] = ['en', 'fr', 'de', 'es'];
  const optOut: Record<SmsLocale, string> = { en: 'STOP to opt out', fr: 'STOP pour vous désabonner', de: 'STOP zum Abmelden', es: 'STOP para darte de baja' };

  for (const locale of locales) {
    for (const kind of ['alert', 'reminder'] as const) {
      it(`writes the ${kind} in ${locale} in one GSM-7 segment, whole title and link, with the opt-out words`, () => {
        const text = composeNotificationText({ shop: 'Maison Dupont', productTitle: 'Linen shirt', variantTitle: 'Blue / M', link: LINK, locale, kind });
        assert.ok(text.includes('Linen shirt - Blue / M'), `the whole title: ${text}`);
        assert.ok(text.includes(LINK) && text.includes(optOut[locale]), `link and opt-out words: ${text}`);
        assert.deepEqual({ encoding: countSegments(text).encoding, segments: countSegments(text).segments }, { encoding: 'GSM-7', segments: 1 }, text);
      });

      it(`cuts a long title in ${locale} (${kind}) with "..." to stay in one segment, never the link`, () => {
        const productTitle = 'Extraordinarily comfortable organic cotton hooded sweatshirt with kangaroo pocket and ribbed cuffs, limited edition';
        const text = composeNotificationText({ shop: 'Maison Dupont', productTitle, variantTitle: 'Forest green / XXL', link: LINK, locale, kind });
        const count = countSegments(text);
        assert.equal(count.segments, 1, `one segment: ${text}`);
        assert.ok(count.units > 150, `the title gave way only as much as needed (${count.units} septets): ${text}`);
        assert.ok(text.includes(`${productTitle.slice(0, 20)}`) && /\.\.\. /.test(text), `cut with "...": ${text}`);
        assert.ok(text.includes(` ${LINK} `) && text.endsWith(optOut[locale]), `link whole, opt-out words last: ${text}`);
      });
    }
  }

  it('leaves out the variant Shopify calls "Default Title"', () => {
    const text = composeNotificationText({ shop: 'Shop', productTitle: 'Mug', variantTitle: 'Default Title', link: LINK, locale: 'en', kind: 'alert' });
    assert.equal(text, `Shop: Mug is back in stock. ${LINK} STOP to opt out`);
  });

  it('uses "…" in a text that is UCS-2 anyway, and takes a second segment rather than cut a title to nothing', () => {
    const text = composeNotificationText({ shop: '東京ストア', productTitle: '限定版の手作り陶器のマグカップ、青い釉薬仕上げ、職人による一点物'.repeat(2), link: LINK, locale: 'en', kind: 'alert' });
    const count = countSegments(text);
    assert.equal(count.encoding, 'UCS-2', text);
    assert.equal(count.segments, 2, `the link alone fills most of a UCS-2 segment: ${text}`);
    assert.ok(text.includes('…') && text.includes(LINK), `cut with "…", link whole: ${text}`);
  });

  it('never cuts inside an emoji', () => {
    const text = composeNotificationText({ shop: 'Shop', productTitle: `Party pack ${'🎉'.repeat(60)}`, link: LINK, locale: 'en', kind: 'alert' });
    assert.ok(!/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/.test(text), `no lone high surrogate: ${text}`);
  });

  it('cuts a very long store name', () => {
    const text = composeNotificationText({ shop: 'The Very Long Name Of A Shop That Goes On And On', productTitle: 'Mug', link: LINK, locale: 'en', kind: 'alert' });
    assert.ok(text.startsWith('The Very Long Name Of A Sho...: Mug'), text);
  });

  for (const locale of locales) {
    it(`writes the double opt-in question, the confirmation and the help in ${locale}, each one GSM-7 segment`, () => {
      const texts = [
        composeConfirmationText({ shop: 'Maison Dupont', productTitle: 'Extraordinarily comfortable organic cotton hooded sweatshirt', locale }),
        composeConfirmationText({ shop: 'Maison Dupont', locale }),
        composeConfirmedText({ shop: 'maison-dupont.myshopify.com', locale }),
        helpText({ sender: 'Restock back-in-stock alerts', locale }),
      ];
      for (const text of texts) {
        assert.ok(gsm(text) && countSegments(text).segments === 1, `one GSM-7 segment: ${text}`);
        assert.ok(text.includes('STOP'), `says how to stop: ${text}`);
      }
      assert.ok(texts[0]!.includes('YES') && texts[1]!.includes('YES'), `asks for YES: ${texts[0]}`);
    });
  }
});

describe('keywords', () => {
  const table: Array<[string, ReturnType<typeof classifyInbound>]> = [
    ['STOP', { kind: 'opt-out', word: 'STOP' }],
    ['  stop\n', { kind: 'opt-out', word: 'STOP' }],
    ['StopAll', { kind: 'opt-out', word: 'STOPALL' }],
    ['unsubscribe', { kind: 'opt-out', word: 'UNSUBSCRIBE' }],
    ['cancel', { kind: 'opt-out', word: 'CANCEL' }],
    ['End', { kind: 'opt-out', word: 'END' }],
    ['quit', { kind: 'opt-out', word: 'QUIT' }],
    ['revoke', { kind: 'opt-out', word: 'REVOKE' }],
    ['OptOut', { kind: 'opt-out', word: 'OPTOUT' }],
    ['start', { kind: 'opt-in', word: 'START' }],
    ['Yes', { kind: 'opt-in', word: 'YES' }],
    ['unstop', { kind: 'opt-in', word: 'UNSTOP' }],
    ['help', { kind: 'help', word: 'HELP' }],
    ['INFO', { kind: 'help', word: 'INFO' }],
    ['STOP please', undefined],
    ['opt out', undefined],
    ['stopp', undefined],
    ['yes!', undefined],
    ['', undefined],
  ];
  for (const [body, expected] of table) {
    it(`reads ${JSON.stringify(body)} as ${expected ? `${expected.kind} (${expected.word})` : 'no keyword'}`, () =>
      assert.deepEqual(classifyInbound(body), expected, `classified ${JSON.stringify(body)}`));
  }
});

/** A recorder for what the SMS feature tells the subscriptions and the ledger. */
function sinks() {
  const pending = new Map<string, string[]>();
  const confirmed: Array<{ phone: string; storeDomains: string[] }> = [];
  const deliveries: DeliveryReport[] = [];
  const consent: SmsConsent = {
    storesAwaitingConfirmation: async (_channel, phone) => pending.get(phone) ?? [],
    async confirmContactPoints(_channel, phone, storeDomains) {
      confirmed.push({ phone, storeDomains });
      return storeDomains.length;
    },
  };
  const reports: DeliveryReports = {
    async recordDelivery(report) {
      deliveries.push(report);
      return true;
    },
  };
  return { pending, confirmed, deliveries, consent, reports };
}

/**
 * Stores by domain, each with its own account or none (then the service's). An account counts as
 * one Twilio vouched for when it was saved unless its store is among `unverified` (saved before the
 * service asked).
 */
function storesWith(accounts: Record<string, SmsAccount | undefined>, unverified: string[] = []) {
  return {
    sendingProfile: async (domain: string) =>
      ({ sending: true, settings: {}, smtpUrl: undefined, smsAccount: accounts[domain], smsAccountVerified: accounts[domain] !== undefined && !unverified.includes(domain) }) as unknown as SendingProfile,
  };
}

function smsConfig(databaseUrl: string, standIn: TwilioStandIn, baseUrl = 'http://restock.test'): Config {
  return testConfig(databaseUrl, {
    BASE_URL: baseUrl,
    TWILIO_ACCOUNT_SID: SERVICE.accountSid,
    TWILIO_AUTH_TOKEN: SERVICE.authToken,
    TWILIO_FROM: SERVICE.from,
    TWILIO_API_URL: standIn.url,
  });
}

async function rejection(promise: Promise<unknown>): Promise<SmsDeliveryError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof SmsDeliveryError, `an SmsDeliveryError, not ${String(err)}`);
    return err;
  }
  assert.fail('the send was expected to fail');
}

describe('sending through the SDK', () => {
  let standIn: TwilioStandIn;
  let sms: SmsService;
  let close: () => Promise<void>;

  before(async () => {
    standIn = await startTwilioStandIn(STAND_IN_ACCOUNTS);
    const config = smsConfig('sqlite::memory:', standIn);
    config.channels.sms = { ...config.channels.sms, timeoutMs: 300 };
    const recorded = sinks();
    // Sending touches no table: the database is never opened.
    const feature = buildSms({ config, database: {} as Database, log: Fastify().log, stores: storesWith({}), consent: recorded.consent, deliveries: recorded.reports });
    sms = feature.service;
    close = async () => feature.close!();
  });
  after(async () => {
    await close();
    await standIn.close();
  });

  it('creates the Message through the SDK: body, sender and callback arrive, the SID comes back', async () => {
    const to = uniquePhone();
    const { providerRef } = await sms.send(SERVICE, { to, body: 'Mug is back. STOP to opt out', statusCallback: 'http://restock.test/sms/twilio/status' });
    assert.match(providerRef, /^SM[0-9a-f]{32}$/, 'a Message SID');
    const sent = standIn.messages.find((message) => message.sid === providerRef);
    assert.ok(sent, 'the stand-in has the message');
    assert.deepEqual(
      { from: sent.from, to: sent.to, body: sent.body, messagingServiceSid: sent.messagingServiceSid, statusCallback: sent.statusCallback },
      { from: SERVICE.from, to, body: 'Mug is back. STOP to opt out', messagingServiceSid: null, statusCallback: 'http://restock.test/sms/twilio/status' },
    );
    assert.match(sent.userAgent, /^twilio-node\/6\./, 'sent by the official SDK');
    await standIn.settled();
  });

  it('sends through a Messaging Service when the sender is one', async () => {
    const { providerRef } = await sms.send(OWN, { to: uniquePhone(), body: 'Hello', statusCallback: 'http://restock.test/sms/twilio/status/own.myshopify.com' });
    const sent = standIn.messages.find((message) => message.sid === providerRef);
    assert.equal(sent?.messagingServiceSid, OWN_SERVICE_SID, 'MessagingServiceSid sent');
    assert.equal(sent?.from, OWN_NUMBER, 'the service picked its number');
    await standIn.settled();
  });

  it('is counted in as many segments by the stand-in as by the feature', async () => {
    const bodies = [
      composeNotificationText({ shop: 'Shop', productTitle: 'Mug', link: 'https://restock.example/c/x', locale: 'de', kind: 'alert' }),
      'a'.repeat(161),
      `${'a'.repeat(152)}€${'a'.repeat(152)}`,
      '😀'.repeat(67),
    ];
    for (const body of bodies) {
      const { providerRef } = await sms.send(SERVICE, { to: uniquePhone(), body, statusCallback: 'http://restock.test/sms/twilio/status' });
      assert.equal(standIn.messages.find((message) => message.sid === providerRef)?.numSegments, countSegments(body).segments, `segments of ${body.slice(0, 20)}`);
    }
    await standIn.settled();
  });

  it('maps the refusals Twilio gives for a number as permanent, an opted-out phone as opted out', async () => {
    for (const code of [21211, 21408, 21612, 21614, 21635] as const) {
      const to = uniquePhone();
      standIn.refuse(to, code);
      const err = await rejection(sms.send(SERVICE, { to, body: 'Hi', statusCallback: 'http://restock.test/s' }));
      assert.deepEqual({ code: err.code, permanent: err.permanent, optedOut: err.optedOut }, { code, permanent: true, optedOut: false }, err.message);
    }
    const stopped = uniquePhone();
    standIn.stop(SERVICE.from, stopped);
    const err = await rejection(sms.send(SERVICE, { to: stopped, body: 'Hi', statusCallback: 'http://restock.test/s' }));
    assert.deepEqual({ code: err.code, permanent: err.permanent, optedOut: err.optedOut }, { code: 21610, permanent: true, optedOut: true }, err.message);
  });

  it('keeps alerts for a retry when the account is refused (401, 20003), Twilio is busy or failing, or unreachable', async () => {
    const wrongToken = await rejection(sms.send({ ...SERVICE, authToken: hex(16) }, { to: uniquePhone(), body: 'Hi', statusCallback: 'http://restock.test/s' }));
    assert.deepEqual({ code: wrongToken.code, permanent: wrongToken.permanent }, { code: 20003, permanent: false }, wrongToken.message);

    standIn.failNext(429);
    const busy = await rejection(sms.send(SERVICE, { to: uniquePhone(), body: 'Hi', statusCallback: 'http://restock.test/s' }));
    assert.deepEqual({ code: busy.code, permanent: busy.permanent }, { code: 20429, permanent: false }, busy.message);

    standIn.failNext(503);
    const failing = await rejection(sms.send(SERVICE, { to: uniquePhone(), body: 'Hi', statusCallback: 'http://restock.test/s' }));
    assert.equal(failing.permanent, false, failing.message);

    const notMine = await rejection(sms.send({ ...SERVICE, from: ELSEWHERE.from }, { to: uniquePhone(), body: 'Hi', statusCallback: 'http://restock.test/s' }));
    assert.deepEqual({ code: notMine.code, permanent: notMine.permanent }, { code: 21660, permanent: false }, notMine.message);
  });

  it('gives up on a silent Twilio within the timeout, for a retry', async () => {
    standIn.hangNext();
    const started = Date.now();
    const err = await rejection(sms.send(SERVICE, { to: uniquePhone(), body: 'Hi', statusCallback: 'http://restock.test/s' }));
    assert.ok(!err.permanent && /could not be reached/.test(err.message), err.message);
    assert.ok(Date.now() - started < 5000, 'bounded by the timeout, not by the stand-in');
  });

  it('answers a closed port as a transient failure', async () => {
    const port = await freePort();
    const config = smsConfig('sqlite::memory:', { ...standIn, url: `http://127.0.0.1:${port}` });
    const recorded = sinks();
    const feature = buildSms({ config, database: {} as Database, log: Fastify().log, stores: storesWith({}), consent: recorded.consent, deliveries: recorded.reports });
    try {
      const err = await rejection(feature.service.send(SERVICE, { to: uniquePhone(), body: 'Hi', statusCallback: 'http://restock.test/s' }));
      assert.ok(!err.permanent && /ECONNREFUSED/.test(err.message), err.message);
    } finally {
      await feature.close!();
    }
  });

  it('refuses a phone not in E.164 form, or a body Twilio would refuse, without retrying', async () => {
    const before = standIn.messages.length;
    const err = await rejection(sms.send(SERVICE, { to: '0612345678', body: 'Hi', statusCallback: 'http://restock.test/s' }));
    assert.ok(err.permanent && err.code === undefined, err.message);
    assert.equal(standIn.messages.length, before, 'nothing reached Twilio');
    const tooLong = await rejection(sms.send(SERVICE, { to: uniquePhone(), body: 'a'.repeat(1601), statusCallback: 'http://restock.test/s' }));
    assert.deepEqual({ code: tooLong.code, permanent: tooLong.permanent }, { code: 21617, permanent: true }, tooLong.message);
  });

  it('sends the double opt-in question without a status callback', async () => {
    const to = uniquePhone();
    const text = composeConfirmationText({ shop: 'Shop', productTitle: 'Mug', locale: 'en' });
    const { providerRef } = await sms.requestConfirmation(SERVICE, to, text);
    const sent = standIn.messages.find((message) => message.sid === providerRef);
    assert.deepEqual({ to: sent?.to, body: sent?.body, statusCallback: sent?.statusCallback }, { to, body: text, statusCallback: null });
  });

  it("chooses the store's own account, else the service's", () => {
    assert.equal(sms.accountFor(OWN), OWN);
    assert.deepEqual(sms.accountFor(undefined), SERVICE);
  });
});

describe("checking a store's own account with Twilio", () => {
  let standIn: TwilioStandIn;
  let check: (account: SmsAccount) => Promise<void>;
  const SUSPENDED: SmsAccount = { accountSid: `AC${hex(16)}`, authToken: hex(16), from: '+15005550009' };

  before(async () => {
    standIn = await startTwilioStandIn(STAND_IN_ACCOUNTS);
    standIn.addAccount({ accountSid: SUSPENDED.accountSid, authToken: SUSPENDED.authToken, numbers: [SUSPENDED.from], status: 'suspended' });
    check = twilioAccountCheck(smsConfig('sqlite::memory:', standIn).channels.sms);
  });
  after(async () => standIn.close());

  /** The problem the check refused with. */
  async function refusal(account: SmsAccount): Promise<Problem> {
    try {
      await check(account);
    } catch (err) {
      assert.ok(err instanceof Problem, `a Problem, not ${String(err)}`);
      return err;
    }
    assert.fail(`${JSON.stringify({ ...account, authToken: '…' })} was accepted`);
  }
  const pointers = (problem: Problem) => (problem instanceof ValidationFailed ? problem.errors.map((error) => error.pointer) : [problem.slug]);

  it('accepts an account Twilio knows with one of its numbers, or one of its Messaging Services, asking the Accounts API first', async () => {
    const asked = standIn.requests.length;
    await check(ELSEWHERE);
    await check(OWN);
    await check({ ...OWN, from: OWN_NUMBER });
    const calls = standIn.requests.slice(asked).map((request) => `${request.method} ${request.url.split('?')[0]}`);
    assert.deepEqual(calls, [
      `GET /2010-04-01/Accounts/${ELSEWHERE.accountSid}.json`,
      `GET /2010-04-01/Accounts/${ELSEWHERE.accountSid}/IncomingPhoneNumbers.json`,
      `GET /2010-04-01/Accounts/${OWN.accountSid}.json`,
      `GET /v1/Services/${OWN_SERVICE_SID}`,
      `GET /2010-04-01/Accounts/${OWN.accountSid}.json`,
      `GET /2010-04-01/Accounts/${OWN.accountSid}/IncomingPhoneNumbers.json`,
    ]);
    assert.ok(standIn.requests.slice(asked).every((request) => request.user === ELSEWHERE.accountSid || request.user === OWN.accountSid), 'as the account itself');
  });

  it('refuses credentials Twilio does not know, naming the field', async () => {
    assert.deepEqual(pointers(await refusal({ ...ELSEWHERE, authToken: hex(16) })), ['/body/smsSender']);
    assert.deepEqual(pointers(await refusal({ ...ELSEWHERE, accountSid: `AC${hex(16)}` })), ['/body/smsSender']);
    assert.deepEqual(pointers(await refusal({ ...SERVICE, authToken: hex(16), from: ELSEWHERE.from })), ['/body/smsSender'], "the service's Account SID with a token of one's own");
  });

  it("refuses a sender that is not the account's: another account's number, a partial match, another account's Messaging Service, the service's own", async () => {
    assert.deepEqual(pointers(await refusal({ ...ELSEWHERE, from: OWN_NUMBER })), ['/body/smsSender/from']);
    assert.deepEqual(pointers(await refusal({ ...ELSEWHERE, from: ELSEWHERE.from.slice(0, -1) })), ['/body/smsSender/from'], 'Twilio’s filter matches part of a number; only the whole one counts');
    assert.deepEqual(pointers(await refusal({ ...ELSEWHERE, from: OWN_SERVICE_SID })), ['/body/smsSender/from']);
    assert.deepEqual(pointers(await refusal({ ...ELSEWHERE, from: SERVICE.from })), ['/body/smsSender/from']);
  });

  it('refuses an account Twilio has suspended', async () => {
    assert.deepEqual(pointers(await refusal(SUSPENDED)), ['/body/smsSender/accountSid']);
  });

  it('answers 502 when Twilio fails or cannot be reached', async () => {
    standIn.failNext(503);
    assert.deepEqual(pointers(await refusal(ELSEWHERE)), ['upstream-failed']);
    standIn.failNext(429);
    assert.deepEqual(pointers(await refusal(ELSEWHERE)), ['upstream-failed']);
    const closed = twilioAccountCheck(smsConfig('sqlite::memory:', { ...standIn, url: `http://127.0.0.1:${await freePort()}` }).channels.sms);
    try {
      await closed(ELSEWHERE);
      assert.fail('accepted without Twilio');
    } catch (err) {
      assert.ok(err instanceof Problem && err.status === 502, String(err));
    }
  });
});

interface SmsApp {
  app: FastifyInstance;
  baseUrl: string;
  sms: SmsService;
  database: Database;
  recorded: ReturnType<typeof sinks>;
  close(): Promise<void>;
}

const OWN_STORE = 'own-store.myshopify.com';
const ELSEWHERE_STORE = 'elsewhere.myshopify.com';
/**
 * Accounts Twilio could never vouch for, kept as if it had (the checks behind the check): one
 * claims the service's sender, one its Account SID with a token of its own. LEGACY_STORE's was
 * saved before the service asked Twilio at all.
 */
const CLAIMS_SENDER_STORE = 'claims-sender.myshopify.com';
const CLAIMS_SENDER: SmsAccount = { accountSid: `AC${hex(16)}`, authToken: hex(16), from: SERVICE.from };
const CLAIMS_SID_STORE = 'claims-sid.myshopify.com';
const CLAIMS_SID: SmsAccount = { accountSid: SERVICE.accountSid, authToken: hex(16), from: '+15005550010' };
const LEGACY_STORE = 'legacy.myshopify.com';
const LEGACY: SmsAccount = { accountSid: `AC${hex(16)}`, authToken: hex(16), from: '+15005550011' };

/** The SMS feature's routes on a bare app with the project's error handling, listening on loopback, where the stand-in calls it. */
async function startSmsApp(testDatabase: TestDatabase, standIn: TwilioStandIn): Promise<SmsApp> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const baseUrl = `http://127.0.0.1:${port}`;
    const config = smsConfig(testDatabase.url, standIn, baseUrl);
    const database = Database.open(config.database);
    const recorded = sinks();
    const app = Fastify({ logger: false, return503OnClosing: false, forceCloseConnections: true });
    app.setValidatorCompiler(validatorCompiler);
    app.setSerializerCompiler(serializerCompiler);
    installErrorHandling(app, config.baseUrl, config.bodyLimitBytes);
    const feature = buildSms({
      config,
      database,
      log: app.log,
      stores: storesWith({ [OWN_STORE]: OWN, [ELSEWHERE_STORE]: ELSEWHERE, [CLAIMS_SENDER_STORE]: CLAIMS_SENDER, [CLAIMS_SID_STORE]: CLAIMS_SID, [LEGACY_STORE]: LEGACY }, [LEGACY_STORE]),
      consent: recorded.consent,
      deliveries: recorded.reports,
    });
    for (const routes of feature.routes ?? []) await app.register(routes);
    const close = async () => {
      await app.close();
      await feature.close!();
      await database.close();
    };
    try {
      await app.listen({ port, host: '127.0.0.1' });
    } catch (err) {
      await close();
      if ((err as { code?: string }).code === 'EADDRINUSE' && attempt < 5) continue;
      throw err;
    }
    return { app, baseUrl, sms: feature.service, database, recorded, close };
  }
}

const optOutRows = (database: Database, phone: string) =>
  database.db.selectFrom('sms_opt_outs').select(['sender', 'phone']).where('phone', '=', phone).orderBy('sender').execute();

for (const dialect of testDialects()) {
  describe(`Twilio's webhooks on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let testDatabase: TestDatabase;
    let standIn: TwilioStandIn;
    let t: SmsApp;
    let inbound: string;
    let status: string;

    before(async () => {
      testDatabase = await createTestDatabase(dialect);
      standIn = await startTwilioStandIn(STAND_IN_ACCOUNTS);
      t = await startSmsApp(testDatabase, standIn);
      inbound = `${t.baseUrl}/sms/twilio/inbound`;
      status = `${t.baseUrl}/sms/twilio/status`;
    });
    after(async () => {
      await standIn?.close();
      await t?.close();
      await testDatabase?.drop();
    });

    it('answers HELP with the help text in TwiML, the stand-in’s own signature accepted by the SDK', async () => {
      const answer = await standIn.textFrom(uniquePhone(), SERVICE.from, 'help', inbound);
      assert.equal(answer.status, 200, answer.body);
      assert.match(answer.contentType, /^text\/xml/);
      assert.equal(answer.body, `<?xml version="1.0" encoding="UTF-8"?><Response><Message>${helpText({ sender: 'Restock back-in-stock alerts', locale: 'en' }).replaceAll('&', '&amp;')}</Message></Response>`);
    });

    it('refuses a forged, missing or misplaced signature, or another account, with 403 and changes nothing', async () => {
      const phone = uniquePhone();
      const before = await tableDigests(t.database);
      const attempts = [
        standIn.textFrom(phone, SERVICE.from, 'STOP', inbound, { signWith: hex(16) }),
        standIn.textFrom(phone, SERVICE.from, 'STOP', inbound, { unsigned: true }),
        standIn.textFrom(phone, SERVICE.from, 'STOP', inbound, { signFor: `${t.baseUrl}/sms/twilio/inbound/${OWN_STORE}` }),
        standIn.textFrom(phone, SERVICE.from, 'STOP', inbound, { fields: { Body: 'START' } }),
        standIn.textFrom(phone, SERVICE.from, 'STOP', inbound, { fields: { AccountSid: OWN.accountSid }, fieldsSigned: true }),
        standIn.textFrom(phone, SERVICE.from, 'STOP', `${t.baseUrl}/sms/twilio/inbound/${OWN_STORE}`),
        standIn.textFrom(phone, SERVICE.from, 'STOP', `${t.baseUrl}/sms/twilio/inbound/unknown.myshopify.com`),
      ];
      for (const answer of await Promise.all(attempts)) {
        assert.equal(answer.status, 403, answer.body);
        assert.match(answer.contentType, /^application\/problem\+json/);
        assert.ok(JSON.parse(answer.body).type.endsWith('/problems/forbidden'), answer.body);
      }
      assert.deepEqual(await tableDigests(t.database), before, 'no table changed');
    });

    it('takes only form posts, answering others with a problem', async () => {
      const res = await t.app.inject({ method: 'POST', url: '/sms/twilio/inbound', payload: '{"Body":"STOP"}', headers: { 'content-type': 'application/json' } });
      expectProblem(res, 415, 'unsupported-media-type');
    });

    it('keeps a STOP as an opt-out of that sender; Twilio refuses the next text with 21610, read as opted out', async () => {
      const phone = uniquePhone();
      const answer = await standIn.textFrom(phone, SERVICE.from, 'Stop', inbound);
      assert.equal(answer.status, 200, answer.body);
      assert.equal(answer.body, '<?xml version="1.0" encoding="UTF-8"?><Response/>', 'Twilio itself confirms the opt-out');
      assert.deepEqual(await optOutRows(t.database, phone), [{ sender: SERVICE.from, phone }]);
      assert.deepEqual(await t.sms.optedOut(SERVICE.from, [phone, uniquePhone()]), new Set([phone]), 'only the phone that stopped');
      assert.deepEqual(await t.sms.optedOut(ELSEWHERE.from, [phone]), new Set(), 'another sender is not stopped');
      const err = await rejection(t.sms.send(SERVICE, { to: phone, body: 'Mug is back', statusCallback: t.sms.statusCallbackUrl('a.myshopify.com', false) }));
      assert.deepEqual({ code: err.code, optedOut: err.optedOut, permanent: err.permanent }, { code: 21610, optedOut: true, permanent: true }, err.message);
    });

    it('lifts the opt-out on START, and the phone can be texted again', async () => {
      const phone = uniquePhone();
      await standIn.textFrom(phone, SERVICE.from, 'STOPALL', inbound);
      assert.equal((await optOutRows(t.database, phone)).length, 1, 'stopped');
      const answer = await standIn.textFrom(phone, SERVICE.from, 'start', inbound);
      assert.equal(answer.body, '<?xml version="1.0" encoding="UTF-8"?><Response/>');
      assert.deepEqual(await optOutRows(t.database, phone), [], 'no opt-out left');
      assert.deepEqual(await t.sms.optedOut(SERVICE.from, [phone]), new Set());
      const { providerRef } = await t.sms.send(SERVICE, { to: phone, body: 'Mug is back', statusCallback: t.sms.statusCallbackUrl('a.myshopify.com', false) });
      assert.match(providerRef, /^SM/, 'Twilio takes it again');
      await standIn.settled();
    });

    it('stops a whole Messaging Service on STOP to one of its numbers', async () => {
      const phone = uniquePhone();
      await standIn.textFrom(phone, OWN_NUMBER, 'quit', `${t.baseUrl}/sms/twilio/inbound/${OWN_STORE}`);
      assert.deepEqual(await optOutRows(t.database, phone), [{ sender: OWN_SERVICE_SID, phone }], "the store's sender, its service, whichever number was written to");
      assert.deepEqual(await t.sms.optedOut(OWN_SERVICE_SID, [phone]), new Set([phone]));
    });

    it('confirms on YES the pending SMS subscriptions of the stores that text from that account and sender, and lifts an opt-out', async () => {
      const phone = uniquePhone();
      await standIn.textFrom(phone, SERVICE.from, 'STOP', inbound);
      t.recorded.pending.set(phone, ['a.myshopify.com', OWN_STORE, 'b.myshopify.com', ELSEWHERE_STORE]);
      const answer = await standIn.textFrom(phone, SERVICE.from, 'yes', inbound);
      assert.equal(answer.status, 200, answer.body);
      assert.deepEqual(t.recorded.confirmed.filter((call) => call.phone === phone), [{ phone, storeDomains: ['a.myshopify.com', 'b.myshopify.com'] }]);
      assert.match(answer.body, /<Message>Restock back-in-stock alerts: you're subscribed\./, answer.body);
      assert.deepEqual(await optOutRows(t.database, phone), [], 'YES is an opt-in too');
    });

    it("confirms on YES at a store's own address that store only", async () => {
      const phone = uniquePhone();
      t.recorded.pending.set(phone, ['a.myshopify.com', OWN_STORE, ELSEWHERE_STORE]);
      const answer = await standIn.textFrom(phone, OWN_NUMBER, 'YES', `${t.baseUrl}/sms/twilio/inbound/${OWN_STORE}`);
      assert.equal(answer.status, 200, answer.body);
      assert.deepEqual(t.recorded.confirmed.filter((call) => call.phone === phone), [{ phone, storeDomains: [OWN_STORE] }]);
      assert.match(answer.body, new RegExp(`<Message>${OWN_STORE}: you're subscribed`), answer.body);
    });

    it('answers a YES that confirms nothing with nothing', async () => {
      const phone = uniquePhone();
      const answer = await standIn.textFrom(phone, SERVICE.from, 'YES', inbound);
      assert.equal(answer.body, '<?xml version="1.0" encoding="UTF-8"?><Response/>');
      assert.deepEqual(t.recorded.confirmed.filter((call) => call.phone === phone), []);
    });

    it('leaves other texts alone', async () => {
      const phone = uniquePhone();
      const before = await tableDigests(t.database);
      const answer = await standIn.textFrom(phone, SERVICE.from, 'stop texting me please', inbound);
      assert.equal(answer.body, '<?xml version="1.0" encoding="UTF-8"?><Response/>');
      assert.deepEqual(await tableDigests(t.database), before, 'nothing recorded');
    });

    it('records delivered, undelivered and failed reports on the row the callback URL names, and ignores the statuses on the way', async () => {
      const [deliveredId, undeliveredId, failedId] = [alertId(), alertId(), alertId()];
      const delivered = await t.sms.send(SERVICE, { to: uniquePhone(), body: 'Mug is back', statusCallback: t.sms.statusCallbackUrl('a.myshopify.com', false, deliveredId) });
      const unreachable = uniquePhone();
      standIn.deliverAs(unreachable, 'undelivered', 30003);
      const undelivered = await t.sms.send(SERVICE, { to: unreachable, body: 'Mug is back', statusCallback: t.sms.statusCallbackUrl('a.myshopify.com', false, undeliveredId) });
      const landline = uniquePhone();
      standIn.deliverAs(landline, 'failed', 30006);
      const failed = await t.sms.send(OWN, { to: landline, body: 'Mug is back', statusCallback: t.sms.statusCallbackUrl(OWN_STORE, true, failedId) });
      await standIn.settled();
      const refs = new Set([delivered.providerRef, undelivered.providerRef, failed.providerRef]);
      const answers = standIn.callbacks.filter((callback) => refs.has(callback.params.MessageSid!));
      assert.ok(answers.length >= 7 && answers.every((callback) => callback.answer === 204), `every callback taken: ${JSON.stringify(answers.map((a) => a.answer))}`);
      const byRef = (a: { providerRef: string }, b: { providerRef: string }) => a.providerRef.localeCompare(b.providerRef);
      assert.deepEqual(
        t.recorded.deliveries.filter((delivery) => refs.has(delivery.providerRef)).sort(byRef),
        [
          { channel: 'sms', providerRef: delivered.providerRef, status: 'delivered', outcome: 'delivered to the phone', notification: { id: deliveredId, storeDomain: undefined } },
          { channel: 'sms', providerRef: undelivered.providerRef, status: 'undelivered', outcome: 'undelivered (provider error 30003)', notification: { id: undeliveredId, storeDomain: undefined } },
          { channel: 'sms', providerRef: failed.providerRef, status: 'failed', outcome: 'failed (provider error 30006)', notification: { id: failedId, storeDomain: OWN_STORE } },
        ].sort(byRef),
        "one final report each, a store's own account's on that store's rows only; sent and queued are not recorded",
      );
    });

    it('records no delivery for a report whose callback URL names no ledger row', async () => {
      const { providerRef } = await t.sms.send(SERVICE, { to: uniquePhone(), body: 'Mug is back', statusCallback: t.sms.statusCallbackUrl('a.myshopify.com', false) });
      await standIn.settled();
      assert.ok(standIn.callbacks.some((callback) => callback.params.MessageSid === providerRef && callback.answer === 204), 'Twilio is answered');
      assert.deepEqual(t.recorded.deliveries.filter((delivery) => delivery.providerRef === providerRef), [], 'nothing recorded');
    });

    it('keeps the opt-out Twilio reports only when a Messaging Service tries to send', async () => {
      const phone = uniquePhone();
      const id = alertId();
      standIn.stop(OWN_SERVICE_SID, phone);
      const { providerRef } = await t.sms.send(OWN, { to: phone, body: 'Mug is back', statusCallback: t.sms.statusCallbackUrl(OWN_STORE, true, id) });
      await standIn.settled();
      assert.deepEqual(t.recorded.deliveries.filter((delivery) => delivery.providerRef === providerRef), [{ channel: 'sms', providerRef, status: 'failed', outcome: 'failed (provider error 21610)', notification: { id, storeDomain: OWN_STORE } }]);
      assert.deepEqual(await optOutRows(t.database, phone), [{ sender: OWN_SERVICE_SID, phone }], "kept as if the phone had texted STOP, against the store's own sender");
    });

    it('refuses a status callback that is not signed by the account its address names', async () => {
      const sid = `SM${hex(16)}`;
      const id = alertId();
      const params = { MessageSid: sid, SmsSid: sid, AccountSid: SERVICE.accountSid, MessageStatus: 'delivered', SmsStatus: 'delivered', To: uniquePhone(), From: SERVICE.from, ApiVersion: '2010-04-01' };
      const post = (url: string, signature: string) =>
        t.app.inject({ method: 'POST', url: url.slice(t.baseUrl.length), payload: new URLSearchParams(params).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': signature } });
      const service = `${status}?alert=${id}`;
      const own = `${status}/${OWN_STORE}?alert=${id}`;
      for (const res of [
        await post(service, twilioSignature(OWN.authToken, service, params)),
        await post(own, twilioSignature(SERVICE.authToken, own, params)),
        await post(service, twilioSignature(SERVICE.authToken, own, params)),
        await post(service, twilioSignature(SERVICE.authToken, status, params)),
      ]) {
        expectProblem(res, 403, 'forbidden');
      }
      assert.deepEqual(t.recorded.deliveries.filter((delivery) => delivery.providerRef === sid), [], 'nothing recorded');
      const signed = await post(service, twilioSignature(SERVICE.authToken, service, params));
      assert.equal(signed.statusCode, 204, signed.body);
      assert.deepEqual(t.recorded.deliveries.filter((delivery) => delivery.providerRef === sid), [{ channel: 'sms', providerRef: sid, status: 'delivered', outcome: 'delivered to the phone', notification: { id, storeDomain: undefined } }]);
    });

    /** A webhook as a store's own account could sign it, whatever it names. */
    function signedBy(account: SmsAccount, url: string, params: Record<string, string>) {
      return t.app.inject({
        method: 'POST',
        url: url.slice(t.baseUrl.length),
        payload: new URLSearchParams(params).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': twilioSignature(account.authToken, url, params) },
      });
    }
    const textParams = (account: SmsAccount, from: string, to: string, body: string, extra: Record<string, string> = {}) => {
      const sid = `SM${hex(16)}`;
      return { MessageSid: sid, SmsSid: sid, AccountSid: account.accountSid, From: from, To: to, Body: body, ApiVersion: '2010-04-01', ...extra };
    };
    const EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response/>';

    it("ignores a keyword a store's own account reports for a number that is not its sender, and changes nothing", async () => {
      const phone = uniquePhone();
      await standIn.textFrom(phone, SERVICE.from, 'STOP', inbound);
      t.recorded.pending.set(phone, ['a.myshopify.com', ELSEWHERE_STORE]);
      const before = await tableDigests(t.database);
      const url = `${t.baseUrl}/sms/twilio/inbound/${ELSEWHERE_STORE}`;
      for (const [to, extra] of [
        [SERVICE.from, {}],
        [OWN_NUMBER, { MessagingServiceSid: OWN_SERVICE_SID }],
      ] as const) {
        for (const body of ['STOP', 'START', 'YES', 'HELP']) {
          const answer = await signedBy(ELSEWHERE, url, textParams(ELSEWHERE, phone, to, body, extra));
          assert.equal(answer.statusCode, 200, answer.body);
          assert.equal(answer.body, EMPTY_TWIML, `${body} to ${to}: nothing to say`);
        }
      }
      assert.deepEqual(await tableDigests(t.database), before, 'no opt-out recorded or lifted');
      assert.deepEqual(t.recorded.confirmed.filter((call) => call.phone === phone), [], 'nothing confirmed');
    });

    it("confirms on YES through a store's own account that store alone, even when its account names the service's Account SID", async () => {
      const phone = uniquePhone();
      t.recorded.pending.set(phone, ['a.myshopify.com', CLAIMS_SID_STORE, OWN_STORE]);
      const url = `${t.baseUrl}/sms/twilio/inbound/${CLAIMS_SID_STORE}`;
      const toService = await signedBy(CLAIMS_SID, url, textParams(CLAIMS_SID, phone, SERVICE.from, 'YES'));
      assert.equal(toService.body, EMPTY_TWIML, toService.body);
      assert.deepEqual(t.recorded.confirmed.filter((call) => call.phone === phone), [], "a YES to the service's number is not the store's");
      const toOwn = await signedBy(CLAIMS_SID, url, textParams(CLAIMS_SID, phone, CLAIMS_SID.from, 'YES'));
      assert.equal(toOwn.statusCode, 200, toOwn.body);
      assert.deepEqual(t.recorded.confirmed.filter((call) => call.phone === phone), [{ phone, storeDomains: [CLAIMS_SID_STORE] }]);
    });

    it("verifies nothing for a store whose saved account claims the service's sender", async () => {
      const phone = uniquePhone();
      const before = await tableDigests(t.database);
      const inboundUrl = `${t.baseUrl}/sms/twilio/inbound/${CLAIMS_SENDER_STORE}`;
      expectProblem(await signedBy(CLAIMS_SENDER, inboundUrl, textParams(CLAIMS_SENDER, phone, SERVICE.from, 'STOP')), 403, 'forbidden');
      const statusUrl = `${t.baseUrl}/sms/twilio/status/${CLAIMS_SENDER_STORE}`;
      const sid = `SM${hex(16)}`;
      const report = { MessageSid: sid, AccountSid: CLAIMS_SENDER.accountSid, MessageStatus: 'failed', ErrorCode: '21610', From: SERVICE.from, To: phone };
      expectProblem(await signedBy(CLAIMS_SENDER, statusUrl, report), 403, 'forbidden');
      assert.deepEqual(await tableDigests(t.database), before, 'nothing recorded');
    });

    it('verifies nothing for a store whose account was saved before Twilio was asked, even texts to its own number', async () => {
      const phone = uniquePhone();
      const before = await tableDigests(t.database);
      t.recorded.pending.set(phone, [LEGACY_STORE]);
      expectProblem(await signedBy(LEGACY, `${t.baseUrl}/sms/twilio/inbound/${LEGACY_STORE}`, textParams(LEGACY, phone, LEGACY.from, 'STOP')), 403, 'forbidden');
      expectProblem(await signedBy(LEGACY, `${t.baseUrl}/sms/twilio/inbound/${LEGACY_STORE}`, textParams(LEGACY, phone, LEGACY.from, 'YES')), 403, 'forbidden');
      const report = { MessageSid: `SM${hex(16)}`, AccountSid: LEGACY.accountSid, MessageStatus: 'failed', ErrorCode: '21610', From: LEGACY.from, To: phone };
      expectProblem(await signedBy(LEGACY, `${t.baseUrl}/sms/twilio/status/${LEGACY_STORE}?alert=${alertId()}`, report), 403, 'forbidden');
      assert.deepEqual(await tableDigests(t.database), before, 'nothing recorded');
      assert.deepEqual(t.recorded.confirmed.filter((call) => call.phone === phone), [], 'nothing confirmed');
    });

    it("keeps a 21610 a store's own account reports only against that store's sender", async () => {
      const phone = uniquePhone();
      const url = `${t.baseUrl}/sms/twilio/status/${ELSEWHERE_STORE}?alert=${alertId()}`;
      const report = (from: string, extra: Record<string, string> = {}) => ({ MessageSid: `SM${hex(16)}`, AccountSid: ELSEWHERE.accountSid, MessageStatus: 'failed', ErrorCode: '21610', From: from, To: phone, ...extra });
      for (const params of [report(SERVICE.from), report(OWN_NUMBER, { MessagingServiceSid: OWN_SERVICE_SID })]) {
        assert.equal((await signedBy(ELSEWHERE, url, params)).statusCode, 204);
      }
      assert.deepEqual(await optOutRows(t.database, phone), [], "another sender's opt-out is not the store's to report");
      assert.equal((await signedBy(ELSEWHERE, url, report(ELSEWHERE.from))).statusCode, 204);
      assert.deepEqual(await optOutRows(t.database, phone), [{ sender: ELSEWHERE.from, phone }]);
    });

    it('answers a signed request whose fields are not Twilio’s with a validation problem', async () => {
      const params = { AccountSid: SERVICE.accountSid, MessageSid: 'not-a-sid', MessageStatus: 'delivered' };
      const res = await t.app.inject({
        method: 'POST',
        url: '/sms/twilio/status',
        payload: new URLSearchParams(params).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': twilioSignature(SERVICE.authToken, status, params) },
      });
      const problem = expectProblem(res, 400, 'validation-failed');
      assert.deepEqual(problem.errors.map((error: { pointer: string }) => error.pointer), ['/body/MessageSid']);
    });
  });
}
