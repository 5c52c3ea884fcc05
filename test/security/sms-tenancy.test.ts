/**
 * Finding 3: a store's own Twilio account acted on other stores' shoppers. A store could save any
 * Account SID and token; its webhooks (`/sms/twilio/{inbound,status}/{its domain}`) are verified
 * with the token it saved, and what they named was believed: a STOP, START or 21610 for the
 * service's shared number, a YES for the service's Account SID. Now the account is Twilio's word
 * (checked with the Accounts API when saved) and its webhooks act on the store's own sender,
 * shoppers and ledger rows alone. The app listens on loopback with the Twilio stand-in
 * (test/fixtures/twilio-stand-in.ts) as Twilio; forged webhooks are signed as a store that holds
 * its own account's token can sign them.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { SmsAccount } from '../../src/sms/schemas.ts';
import { call, createStore, expectProblem, expectStatus, storeWithAgent, uniqueDomain, uniqueEmail, type StoreAgent } from '../fixtures/agents.ts';
import { dialectSkip, startListeningTestApp, testDialects, type TestApp } from '../fixtures/app.ts';
import { failOnLeakedHandles } from '../fixtures/leaks.ts';
import { after, before, describe, it } from '../fixtures/suites.ts';
import { startTwilioStandIn, twilioSignature, type TwilioStandIn } from '../fixtures/twilio-stand-in.ts';

failOnLeakedHandles();

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const BOUND = { timeout: 60_000 };
/** The service's own account and its shared number, which every store without its own texts from. */
const SERVICE: SmsAccount = { accountSid: `AC${hex(16)}`, authToken: hex(16), from: '+15005550006' };
const SOURCE = { kind: 'inventory-api', ref: 'agt_sms_tenancy_test', verified: false } as const;
const PRODUCT = { id: 'gid://shopify/Product/3001', title: 'Green teapot', url: 'https://shop.example/products/green-teapot' };
const SMS_CONSENT = 'Text me once when it is back. Msg & data rates may apply. Reply STOP to end.';
const EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response/>';

let serial = 0;
const uniquePhone = () => `+1555${String(1_000_000 + ++serial).slice(1)}${Math.floor(Math.random() * 10)}`;
let numbers = 0;
/** A number of its own for each store account (the +1 500 555 range Twilio keeps for tests). */
const uniqueNumber = () => `+1500555${String(1000 + ++numbers)}`;

for (const dialect of testDialects()) {
  describe(`finding 3: a store's own Twilio account acts on that store alone, on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let twilio: TwilioStandIn;
    let t: TestApp;
    let base: string;

    before(async () => {
      twilio = await startTwilioStandIn([{ accountSid: SERVICE.accountSid, authToken: SERVICE.authToken, numbers: [SERVICE.from] }]);
      ({ t, base } = await startListeningTestApp(dialect, {
        TWILIO_ACCOUNT_SID: SERVICE.accountSid,
        TWILIO_AUTH_TOKEN: SERVICE.authToken,
        TWILIO_FROM: SERVICE.from,
        TWILIO_API_URL: twilio.url,
        RECONCILE_INTERVAL_MINUTES: '0',
        // A store's own account is kept sealed.
        RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      }));
    });
    after(async () => {
      await twilio?.settled();
      await t?.close();
      await twilio?.close();
    });

    // --- helpers ---------------------------------------------------------------------------

    /** A Twilio account the stand-in holds, with one number: what an attacker opens for themselves. */
    function twilioAccount(): SmsAccount {
      const account = { accountSid: `AC${hex(16)}`, authToken: hex(16), from: uniqueNumber() };
      twilio.addAccount({ accountSid: account.accountSid, authToken: account.authToken, numbers: [account.from] });
      return account;
    }

    const saveSender = (store: StoreAgent, body: Record<string, unknown>) => call(t.app, 'PATCH', `/api/v1/stores/${store.domain}`, { token: store.token, body });

    /** A store whose owner's agent saved its own Twilio account. */
    async function storeWithOwnAccount(account = twilioAccount()): Promise<StoreAgent & { account: SmsAccount }> {
      const store = await storeWithAgent(t.app, t.database, 'own-twilio');
      assert.equal(expectStatus(await saveSender(store, { smsSender: account }), 200).ownSmsSender, true);
      return { ...store, account };
    }

    /** A webhook signed with `token` for the address it is posted to, as Twilio signs. */
    function signed(token: string, path: string, params: Record<string, string>) {
      return t.app.inject({
        method: 'POST',
        url: path,
        payload: new URLSearchParams(params).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': twilioSignature(token, `${base}${path}`, params) },
      });
    }

    const inboundText = (accountSid: string, from: string, to: string, body: string) => {
      const sid = `SM${hex(16)}`;
      return { ToCountry: 'US', SmsMessageSid: sid, NumMedia: '0', SmsSid: sid, SmsStatus: 'received', Body: body, To: to, NumSegments: '1', MessageSid: sid, AccountSid: accountSid, From: from, ApiVersion: '2010-04-01' };
    };

    const optOuts = (phone: string) => t.database.db.selectFrom('sms_opt_outs').select(['sender', 'phone']).where('phone', '=', phone).orderBy('sender').execute();

    /** A store with the product sold out, no quiet hours (the real time of day must not decide). */
    async function shop(domain = uniqueDomain('sms-tenancy')): Promise<string> {
      if (!(await t.app.restock.stores.findStore(domain))) await createStore(t.database, domain, uniqueEmail('owner'));
      await t.app.restock.stores.updateSettings(domain, { smsQuietHours: { start: 0, end: 0 } });
      await t.app.restock.inventory.reportStock(domain, [{ productId: PRODUCT.id, variantId: null, available: 0, productTitle: PRODUCT.title, productUrl: PRODUCT.url }], SOURCE);
      return domain;
    }

    /** A shopper's sign-up with a phone on the store's widget; the phone waits for its YES. */
    async function signUpWithPhone(domain: string, phone: string): Promise<string> {
      const email = uniqueEmail('shopper');
      const res = await t.app.inject({
        method: 'POST',
        url: '/storefront/v1/subscribe',
        headers: { 'content-type': 'application/json', origin: 'https://shop.example' },
        payload: JSON.stringify({ shop: domain, productId: PRODUCT.id, email, phone, smsConsent: true, smsConsentText: SMS_CONSENT }),
      });
      assert.equal(res.statusCode, 201, res.body);
      return email;
    }

    const smsPoints = (domain: string, phone: string) =>
      t.database.db.selectFrom('contact_points').select(['status']).where('store_domain', '=', domain).where('channel', '=', 'sms').where('address_key', '=', phone).execute();

    /**
     * A text the store sent a confirmed shopper, in the ledger with its Message SID and the
     * delivery Twilio reported: the question, the shopper's YES to `number` at `inbound`, a restock.
     */
    async function deliveredAlert(domain: string, number: string, inbound: string) {
      const phone = uniquePhone();
      await signUpWithPhone(domain, phone);
      await t.runWorker();
      const yes = await twilio.textFrom(phone, number, 'YES', `${base}${inbound}`);
      assert.match(yes.body, /you're subscribed/, yes.body);
      await t.app.restock.inventory.reportStock(domain, [{ productId: PRODUCT.id, variantId: null, available: 5 }], SOURCE);
      await t.runWorker();
      await twilio.settled();
      const row = await t.database.db.selectFrom('notifications').selectAll().where('store_domain', '=', domain).where('channel', '=', 'sms').where('kind', '=', 'alert').executeTakeFirst();
      assert.ok(row?.provider_ref, `the text to ${phone} is in the ledger with its SID`);
      assert.equal(row.delivery_status, 'delivered', 'Twilio reported it delivered');
      return row;
    }

    const deliveryOf = async (id: string) =>
      t.database.db.selectFrom('notifications').select(['delivery_status', 'outcome']).where('id', '=', id).executeTakeFirstOrThrow();

    // --- the forged effects --------------------------------------------------------------------

    it("finding 3: a STOP through a store's own account does not silence a phone at the service's shared number", BOUND, async () => {
      const evil = await storeWithOwnAccount();
      const phone = uniquePhone();
      const answer = await signed(evil.account.authToken, `/sms/twilio/inbound/${evil.domain}`, inboundText(evil.account.accountSid, phone, SERVICE.from, 'STOP'));
      assert.equal(answer.statusCode, 200, answer.body);
      assert.equal(answer.body, EMPTY_TWIML);
      assert.deepEqual(await optOuts(phone), [], "no opt-out of the shared number: every store texting from it would lose the phone");
    });

    it("finding 3: a START through a store's own account does not lift a phone's genuine opt-out of the shared number", BOUND, async () => {
      const evil = await storeWithOwnAccount();
      const phone = uniquePhone();
      const stop = await twilio.textFrom(phone, SERVICE.from, 'STOP', `${base}/sms/twilio/inbound`);
      assert.equal(stop.status, 200, stop.body);
      assert.deepEqual(await optOuts(phone), [{ sender: SERVICE.from, phone }], 'the phone stopped the shared number');
      const answer = await signed(evil.account.authToken, `/sms/twilio/inbound/${evil.domain}`, inboundText(evil.account.accountSid, phone, SERVICE.from, 'START'));
      assert.equal(answer.statusCode, 200, answer.body);
      assert.deepEqual(await optOuts(phone), [{ sender: SERVICE.from, phone }], 'the genuine opt-out stays');
    });

    it("finding 3: a failed/21610 status callback through a store's own account does not opt a phone out of the shared number", BOUND, async () => {
      const evil = await storeWithOwnAccount();
      const phone = uniquePhone();
      const sid = `SM${hex(16)}`;
      const report = { MessageSid: sid, SmsSid: sid, AccountSid: evil.account.accountSid, MessageStatus: 'failed', SmsStatus: 'failed', ErrorCode: '21610', From: SERVICE.from, To: phone, ApiVersion: '2010-04-01' };
      const answer = await signed(evil.account.authToken, `/sms/twilio/status/${evil.domain}`, report);
      assert.equal(answer.statusCode, 204, answer.body);
      assert.deepEqual(await optOuts(phone), [], 'no opt-out of the shared number');
    });

    it("finding 3: a forged YES through a store's account naming the service's Account SID confirms no consent at another store", BOUND, async () => {
      const victim = await shop();
      const phone = uniquePhone();
      await signUpWithPhone(victim, phone);
      assert.deepEqual(await smsPoints(victim, phone), [{ status: 'pending' }], 'the phone waits for its own YES');

      const evil = await storeWithAgent(t.app, t.database, 'claims-service');
      const forgedToken = hex(16);
      const claim = await saveSender(evil, { smsSender: { accountSid: SERVICE.accountSid, authToken: forgedToken, from: twilioAccount().from } });
      const yes = await signed(forgedToken, `/sms/twilio/inbound/${evil.domain}`, inboundText(SERVICE.accountSid, phone, SERVICE.from, 'YES'));
      assert.deepEqual(await smsPoints(victim, phone), [{ status: 'pending' }], `no consent was made up at ${victim} (save: ${claim.statusCode}, YES: ${yes.statusCode})`);
      expectProblem(claim, 400, 'validation-failed');
      expectProblem(yes, 403, 'forbidden');
    });

    it('finding 3: a Twilio account Twilio does not vouch for is refused at save, and nothing is saved', BOUND, async () => {
      const store = await storeWithAgent(t.app, t.database, 'unverified');
      const before = await t.app.restock.stores.findStore(store.domain);
      const genuine = twilioAccount();
      const attempts: Array<[string, Record<string, unknown>, string]> = [
        ['invented credentials', { smsSender: { accountSid: `AC${hex(16)}`, authToken: hex(16), from: uniqueNumber() } }, '/body/smsSender'],
        ["the service's Account SID with a token of one's own", { smsSender: { ...SERVICE, authToken: hex(16), from: genuine.from } }, '/body/smsSender'],
        ["the service's shared number", { smsSender: { ...genuine, from: SERVICE.from } }, '/body/smsSender/from'],
        ["a number of another account, beside other settings", { senderName: 'Changed', smtpUrl: 'smtp://smtp.example.com:587', smsSender: { ...genuine, from: twilioAccount().from } }, '/body/smsSender/from'],
        ["a Messaging Service of no account's", { smsSender: { ...genuine, from: `MG${hex(16)}` } }, '/body/smsSender/from'],
      ];
      for (const [what, body, pointer] of attempts) {
        const problem = expectProblem(await saveSender(store, body), 400, 'validation-failed');
        assert.deepEqual(problem.errors.map((error: { pointer: string }) => error.pointer), [pointer], what);
      }
      twilio.failNext(503);
      const down = expectProblem(await saveSender(store, { smsSender: genuine }), 502, 'upstream-failed');
      assert.match(down.detail, /Nothing was saved/);
      assert.deepEqual(await t.app.restock.stores.findStore(store.domain), before, 'the store row is as it was: no sender, no SMTP URL, no setting');

      const saved = expectStatus(await saveSender(store, { smsSender: genuine }), 200);
      assert.equal(saved.ownSmsSender, true, "the account Twilio vouches for, with its own number, is saved");
    });

    // --- delivery reports without the ledger id ---------------------------------------------------

    it("suspicion: a status callback without alert on a store's own route leaves another store's notification alone", BOUND, async () => {
      const victim = await shop();
      const row = await deliveredAlert(victim, SERVICE.from, '/sms/twilio/inbound');
      const evil = await storeWithOwnAccount();
      const report = { MessageSid: row.provider_ref!, AccountSid: evil.account.accountSid, MessageStatus: 'failed', ErrorCode: '30006', From: evil.account.from, To: uniquePhone() };
      const answer = await signed(evil.account.authToken, `/sms/twilio/status/${evil.domain}`, report);
      assert.equal(answer.statusCode, 204, answer.body);
      assert.deepEqual(await deliveryOf(row.id), { delivery_status: 'delivered', outcome: row.outcome }, `${victim}'s text is still the delivered one`);
    });

    it("suspicion: a status callback without alert on the service's route leaves a store's own-account notification alone", BOUND, async () => {
      const own = await storeWithOwnAccount();
      await shop(own.domain);
      const row = await deliveredAlert(own.domain, own.account.from, `/sms/twilio/inbound/${own.domain}`);
      const report = { MessageSid: row.provider_ref!, AccountSid: SERVICE.accountSid, MessageStatus: 'undelivered', ErrorCode: '30003', From: SERVICE.from, To: uniquePhone() };
      const answer = await signed(SERVICE.authToken, '/sms/twilio/status', report);
      assert.equal(answer.statusCode, 204, answer.body);
      assert.deepEqual(await deliveryOf(row.id), { delivery_status: 'delivered', outcome: row.outcome }, `${own.domain}'s text, sent from its own account, is untouched`);
    });
  });
}
