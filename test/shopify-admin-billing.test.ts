import '@shopify/shopify-api/adapters/node';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from './fixtures/suites.ts';
import {
  ApiVersion,
  BillingInterval,
  GraphqlQueryError,
  HttpResponseError,
  LogSeverity,
  RequestedTokenType,
  Session,
  shopifyApi,
  type Shopify,
} from '@shopify/shopify-api';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startShopifyAdmin, type ShopifyAdminStandIn } from './fixtures/shopify-admin.ts';

failOnLeakedHandles();

const API_KEY = 'restock-billing-test-app';
const API_SECRET = `shpss_${randomBytes(16).toString('hex')}`;
const SCOPES = 'read_products';
const APP_ID = 755357713;
const RETURN_URL = 'https://restock.test/billing/return';

let counter = 0;
const newShop = () => `billing-${Date.now() % 1_000_000}${++counter}.myshopify.com`;

const CREATE = `mutation RestockSubscribe(
  $name: String!
  $lineItems: [AppSubscriptionLineItemInput!]!
  $returnUrl: URL!
  $test: Boolean
  $trialDays: Int
) {
  appSubscriptionCreate(name: $name, lineItems: $lineItems, returnUrl: $returnUrl, test: $test, trialDays: $trialDays) {
    appSubscription {
      id name status test createdAt currentPeriodEnd
      lineItems { id plan { pricingDetails { ... on AppRecurringPricing { price { amount currencyCode } interval } } } }
    }
    confirmationUrl
    userErrors { field message }
  }
}`;

const ACTIVE = `query RestockActiveSubscriptions {
  currentAppInstallation {
    activeSubscriptions {
      id name status test currentPeriodEnd
      lineItems { id plan { pricingDetails { ... on AppRecurringPricing { price { amount currencyCode } interval } } } }
    }
  }
}`;

const NODE = `query RestockSubscription($id: ID!) {
  node(id: $id) { ... on AppSubscription { id name status } }
}`;

interface Subscription {
  id: string;
  name: string;
  status: string;
  test: boolean;
  createdAt: string;
  currentPeriodEnd: string | null;
  lineItems: Array<{ id: string; plan: { pricingDetails: { price: { amount: string; currencyCode: string }; interval: string } } }>;
}

interface CreateAnswer {
  appSubscriptionCreate: {
    appSubscription: Subscription | null;
    confirmationUrl: string | null;
    userErrors: Array<{ field: string[]; message: string }>;
  };
}

const monthly = (amount: number | string, currencyCode = 'USD') => [
  { plan: { appRecurringPricingDetails: { price: { amount, currencyCode }, interval: 'EVERY_30_DAYS' } } },
];

describe('Shopify Billing in the Admin stand-in, through the official library', () => {
  let standIn: ShopifyAdminStandIn;
  let shopify: Shopify;

  before(async () => {
    standIn = await startShopifyAdmin({ apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES, appId: APP_ID });
    shopify = shopifyApi({
      apiKey: API_KEY,
      apiSecretKey: API_SECRET,
      // The version the app is configured with by default.
      apiVersion: ApiVersion.July26,
      scopes: SCOPES.split(','),
      hostName: 'restock.test',
      isEmbeddedApp: true,
      billing: { Pro: { lineItems: [{ amount: 12, currencyCode: 'EUR', interval: BillingInterval.Every30Days }] } },
      logger: { level: LogSeverity.Error, log: async () => {} },
    });
  });
  after(() => standIn.close());

  /** A shop where the app is installed: its offline token came from token exchange, as the app gets it. */
  async function installedShop(): Promise<{ shop: string; session: Session }> {
    const shop = newShop();
    standIn.addShop(shop, { email: `owner@${shop}` });
    await shopify.auth.tokenExchange({ shop, sessionToken: await standIn.sessionToken(shop), requestedTokenType: RequestedTokenType.OfflineAccessToken });
    const accessToken = standIn.accessToken(shop);
    assert.ok(accessToken);
    // The same session the app builds around a stored token.
    const session = new Session({ id: shopify.session.getOfflineId(shop), shop, state: '', isOnline: false, accessToken });
    return { shop, session };
  }

  async function create(session: Session, variables: Record<string, unknown>): Promise<CreateAnswer['appSubscriptionCreate']> {
    const client = new shopify.clients.Graphql({ session });
    const response = await client.request<CreateAnswer>(CREATE, { variables });
    return response.data!.appSubscriptionCreate;
  }

  async function subscribe(session: Session, name: string): Promise<Subscription> {
    const answer = await create(session, { name, lineItems: monthly(10), returnUrl: RETURN_URL, test: true });
    assert.deepEqual(answer.userErrors, []);
    return answer.appSubscription!;
  }

  async function activeSubscriptions(session: Session): Promise<Subscription[]> {
    const client = new shopify.clients.Graphql({ session });
    const response = await client.request<{ currentAppInstallation: { activeSubscriptions: Subscription[] } }>(ACTIVE);
    return response.data!.currentAppInstallation.activeSubscriptions;
  }

  it('creates a PENDING subscription with a confirmation URL on the shop', async () => {
    const { shop, session } = await installedShop();
    const before = Date.now() - 1000;
    const answer = await create(session, { name: 'Restock Pro', lineItems: monthly(9.99), returnUrl: RETURN_URL, test: true, trialDays: 7 });
    assert.deepEqual(answer.userErrors, []);
    const subscription = answer.appSubscription!;
    assert.match(subscription.id, /^gid:\/\/shopify\/AppSubscription\/\d+$/);
    assert.equal(subscription.name, 'Restock Pro');
    assert.equal(subscription.status, 'PENDING');
    assert.equal(subscription.test, true);
    assert.equal(subscription.currentPeriodEnd, null);
    assert.ok(Date.parse(subscription.createdAt) >= before);
    assert.equal(subscription.lineItems.length, 1);
    assert.deepEqual(subscription.lineItems[0]!.plan.pricingDetails.price, { amount: '9.99', currencyCode: 'USD' });
    assert.equal(subscription.lineItems[0]!.plan.pricingDetails.interval, 'EVERY_30_DAYS');

    const url = new URL(answer.confirmationUrl!);
    assert.equal(url.protocol, 'https:');
    assert.equal(url.hostname, shop);
    const number = subscription.id.split('/').pop();
    assert.equal(url.pathname, `/admin/charges/${APP_ID}/${number}/RecurringApplicationCharge/confirm_recurring_application_charge`);
    assert.ok(url.searchParams.get('signature'));

    const [held] = standIn.appSubscriptions(shop);
    assert.equal(held!.status, 'PENDING');
    assert.equal(held!.trialDays, 7);
    assert.deepEqual(await activeSubscriptions(session), [], 'a pending subscription is not active');
  });

  it('answers userErrors and no subscription for what Shopify refuses', async () => {
    const { shop, session } = await installedShop();
    const cases: Array<[Record<string, unknown>, string[]]> = [
      [{ name: '', lineItems: monthly(10), returnUrl: RETURN_URL }, ['name']],
      [{ name: 'Pro', lineItems: [], returnUrl: RETURN_URL }, ['lineItems']],
      [{ name: 'Pro', lineItems: monthly(0), returnUrl: RETURN_URL }, ['lineItems', '0', 'plan', 'appRecurringPricingDetails', 'price', 'amount']],
      [{ name: 'Pro', lineItems: monthly(-5), returnUrl: RETURN_URL }, ['lineItems', '0', 'plan', 'appRecurringPricingDetails', 'price', 'amount']],
      [{ name: 'Pro', lineItems: monthly(10), returnUrl: 'javascript:alert(1)' }, ['returnUrl']],
      [{ name: 'Pro', lineItems: monthly(10), returnUrl: 'ftp://restock.test/back' }, ['returnUrl']],
      [{ name: 'Pro', lineItems: monthly(10), returnUrl: 'not a url' }, ['returnUrl']],
    ];
    for (const [variables, field] of cases) {
      const answer = await create(session, variables);
      assert.equal(answer.appSubscription, null, JSON.stringify(variables));
      assert.equal(answer.confirmationUrl, null);
      assert.equal(answer.userErrors.length, 1, JSON.stringify(answer.userErrors));
      assert.deepEqual(answer.userErrors[0]!.field, field);
      assert.ok(answer.userErrors[0]!.message);
    }
    // A required variable left out fails the request itself, as GraphQL does.
    await assert.rejects(create(session, { lineItems: monthly(10), returnUrl: RETURN_URL }), (err: unknown) => {
      assert.ok(err instanceof GraphqlQueryError);
      assert.match(err.message, /\$name of type String!/);
      return true;
    });
    assert.deepEqual(standIn.appSubscriptions(shop), []);
  });

  it('refuses a call without the shop offline token, as the other Admin calls', async () => {
    const { shop } = await installedShop();
    const forged = new Session({ id: shopify.session.getOfflineId(shop), shop, state: '', isOnline: false, accessToken: 'shpat_not-the-token' });
    await assert.rejects(create(forged, { name: 'Pro', lineItems: monthly(10), returnUrl: RETURN_URL }), (err: unknown) => {
      assert.ok(err instanceof HttpResponseError);
      assert.equal(err.response.code, 401);
      return true;
    });
    assert.deepEqual(standIn.appSubscriptions(shop), []);
  });

  it('lists an approved subscription as ACTIVE for 30 days, and sends the merchant back with charge_id', async () => {
    const { shop, session } = await installedShop();
    const subscription = await subscribe(session, 'Restock Pro');
    const back = new URL(standIn.approveSubscription(shop, subscription.id));
    assert.equal(`${back.origin}${back.pathname}`, RETURN_URL);
    assert.equal(back.searchParams.get('charge_id'), subscription.id.split('/').pop());

    const active = await activeSubscriptions(session);
    assert.deepEqual(active.map((sub) => [sub.id, sub.status, sub.name]), [[subscription.id, 'ACTIVE', 'Restock Pro']]);
    const periodDays = (Date.parse(active[0]!.currentPeriodEnd!) - Date.now()) / 86_400_000;
    assert.ok(periodDays > 29.9 && periodDays <= 30, `current period ends in ${periodDays} days`);

    const client = new shopify.clients.Graphql({ session });
    const node = await client.request<{ node: { id: string; status: string } | null }>(NODE, { variables: { id: subscription.id } });
    assert.equal(node.data!.node!.status, 'ACTIVE');
    const missing = await client.request<{ node: unknown }>(NODE, { variables: { id: 'gid://shopify/AppSubscription/999999999' } });
    assert.equal(missing.data!.node, null);

    assert.throws(() => standIn.approveSubscription(shop, subscription.id), /not PENDING/, 'the confirmation page is spent');
  });

  it('cancels the active subscription when the merchant approves another', async () => {
    const { shop, session } = await installedShop();
    const first = await subscribe(session, 'Basic');
    standIn.approveSubscription(shop, first.id);
    const second = await subscribe(session, 'Pro');
    assert.deepEqual((await activeSubscriptions(session)).map((sub) => sub.id), [first.id], 'the first stays until the second is approved');
    standIn.approveSubscription(shop, second.id);

    assert.deepEqual((await activeSubscriptions(session)).map((sub) => [sub.id, sub.name]), [[second.id, 'Pro']]);
    assert.deepEqual(
      standIn.appSubscriptions(shop).map((sub) => [sub.id, sub.status]),
      [[first.id, 'CANCELLED'], [second.id, 'ACTIVE']],
    );
  });

  it('records a decline, and lets a test freeze or expire a subscription', async () => {
    const { shop, session } = await installedShop();
    const declined = await subscribe(session, 'Declined');
    standIn.declineSubscription(shop, declined.id);
    assert.equal(standIn.appSubscriptions(shop)[0]!.status, 'DECLINED');
    assert.throws(() => standIn.approveSubscription(shop, declined.id), /not PENDING/);
    assert.deepEqual(await activeSubscriptions(session), []);

    const frozen = await subscribe(session, 'Frozen');
    standIn.approveSubscription(shop, frozen.id);
    standIn.setSubscriptionStatus(shop, frozen.id, 'FROZEN');
    assert.deepEqual(await activeSubscriptions(session), [], 'a frozen subscription is not listed as active');
    standIn.setSubscriptionStatus(shop, frozen.id, 'ACTIVE');
    assert.deepEqual((await activeSubscriptions(session)).map((sub) => sub.id), [frozen.id]);

    const expired = await subscribe(session, 'Expired');
    standIn.setSubscriptionStatus(shop, expired.id, 'EXPIRED');
    assert.equal(standIn.appSubscriptions(shop).find((sub) => sub.id === expired.id)!.status, 'EXPIRED');
    assert.throws(() => standIn.approveSubscription(shop, 'gid://shopify/AppSubscription/0'), /has no app subscription/);
  });

  it('builds the app_subscriptions/update webhook body with the documented fields', async () => {
    const { shop, session } = await installedShop();
    const subscription = await subscribe(session, 'Restock Pro');
    const pending = standIn.appSubscriptionWebhook(shop, subscription.id);
    assert.equal(pending.app_subscription.status, 'PENDING');
    standIn.approveSubscription(shop, subscription.id);

    const body = standIn.appSubscriptionWebhook(shop, subscription.id);
    assert.deepEqual(Object.keys(body), ['app_subscription']);
    assert.deepEqual(Object.keys(body.app_subscription), [
      'admin_graphql_api_id', 'name', 'status', 'admin_graphql_api_shop_id', 'created_at', 'updated_at',
      'currency', 'capped_amount', 'price', 'interval', 'plan_handle',
    ]);
    const sub = body.app_subscription;
    assert.equal(sub.admin_graphql_api_id, subscription.id);
    assert.equal(sub.name, 'Restock Pro');
    assert.equal(sub.status, 'ACTIVE', 'the status is the GraphQL enum, in capitals');
    assert.match(sub.admin_graphql_api_shop_id, /^gid:\/\/shopify\/Shop\/\d+$/);
    assert.match(sub.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$/);
    assert.match(sub.updated_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$/);
    assert.ok(Date.parse(sub.updated_at) >= Date.parse(sub.created_at));
    assert.equal(sub.currency, 'USD');
    assert.equal(sub.capped_amount, null, 'no usage line item, no cap');
    assert.equal(sub.price, '10.00');
    assert.equal(sub.interval, 'every_30_days');
    // It is what a delivery carries: plain JSON.
    assert.deepEqual(JSON.parse(JSON.stringify(body)), body);
  });

  it("serves the library's own billing request and check", async () => {
    const { shop, session } = await installedShop();
    const requested = await shopify.billing.request({ session, plan: 'Pro', isTest: true, returnObject: true });
    assert.equal(new URL(requested.confirmationUrl).hostname, shop);
    assert.equal(await shopify.billing.check({ session, plans: ['Pro'], isTest: true }), false);
    assert.ok(requested.appSubscription);
    standIn.approveSubscription(shop, requested.appSubscription.id);
    const payments = await shopify.billing.check({ session, plans: ['Pro'], isTest: true, returnObject: true });
    assert.equal(payments.hasActivePayment, true);
    assert.deepEqual(payments.appSubscriptions.map((sub) => [sub.name, sub.status]), [['Pro', 'ACTIVE']]);
  });
});
