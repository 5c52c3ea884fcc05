import { createHmac } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type Stripe from 'stripe';
import type { Config, PaymentsConfig } from '../config.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import { SecretBox } from '../core/sealed-secrets.ts';
import { noMetrics, type Metrics } from '../core/metrics.ts';
import type { WorkerJob } from '../core/jobs.ts';
import { paymentGate } from './gate.ts';
import { bindOperations, type PriceSheet } from '../core/operations.ts';
import { offerAvailability, PriceList } from './offers.ts';
import { paymentOperations } from './operations.ts';
import { PaymentService, RECONCILE_EVERY_MS, type CarriedOffers, type PaymentEngines } from './service.ts';
import { PaymentRepository } from './repository.ts';

export interface PaymentsFeature extends Feature<PaymentService> {
  /** Finishes settlements whose outcome was unknown (run by the worker). */
  jobs: WorkerJob[];
}

/**
 * The settings payments run on: as configured, or on test networks (PAYMENTS_TEST_NETWORK), paid
 * to the wallet the service keeps (wallet.ts) on x402's test network and Tempo's testnet.
 */
async function paymentsInForce(config: Config, database: Database): Promise<PaymentsConfig> {
  const { payments } = config;
  if (!payments.testNetwork) return payments;
  const { loadPaymentWallet } = await import('./wallet.ts');
  const { address } = await loadPaymentWallet(database, SecretBox.fromKey(config.encryptionKey));
  return {
    ...payments,
    x402: { ...payments.x402, ...payments.testNetwork.x402, assetDecimals: 6, payTo: address },
    tempo: { recipient: address, rpcUrl: undefined, currency: undefined, testnet: true },
  };
}

/**
 * What `/api`, the front door and the 402s say of payments that move no money: test networks, and
 * the card session beside the hosted test checkout; undefined for real ones. A 402 says it of the
 * ways it carries (`carried`); `/api` and the front door of the networks.
 */
export function testModeNotice(payments: PaymentsConfig, carried: CarriedOffers = { x402: true, mpp: ['tempo'] }): string | undefined {
  const notices = [testNetworksNotice(payments, carried), carried.mpp.includes('card') && payments.card.testCheckout && TEST_CARD_NOTICE];
  const said = notices.filter((notice): notice is string => typeof notice === 'string');
  return said.length > 0 ? said.join(' ') : undefined;
}

const TEST_CARD_NOTICE =
  "MPP card is this deployment's hosted test checkout, in test mode: no card is charged, and the plan it opens is completed on that page (by the store's owner; anyone else's is a proposal the owner accepts there).";

function testNetworksNotice(payments: PaymentsConfig, carried: CarriedOffers): string | undefined {
  if (!payments.testNetwork) return undefined;
  const networks = [carried.x402 && `x402 on ${payments.testNetwork.x402.network}`, carried.mpp.includes('tempo') && "MPP tempo on Tempo's testnet"].filter((part): part is string => typeof part === 'string');
  if (networks.length === 0) return undefined;
  return `Payments on this deployment are on test networks only (${networks.join(', ')}), paid to the service's own test wallet: they move test tokens, not money. Its operator sets X402_PAY_TO (and the MPP settings) to take real payments.`;
}

/**
 * Pay per request: the `payment-gate` plugin, the ledger's routes, and reconciliation. The MPP challenge key is derived from the service secret, so every process
 * sharing the database issues and accepts the same challenges. Offers that lack a setting are
 * named in the log at start-up (and in every 402), never filled with a placeholder.
 */
export interface PaymentsDeps {
  config: Config;
  database: Database;
  serviceSecret: Buffer;
  log: FastifyBaseLogger;
  /** The price sheets of every declared paid operation. */
  prices: PriceSheet[];
  stripe?: Stripe;
  metrics?: Metrics;
}

export function buildPayments({ config, database, serviceSecret, log, prices: sheets, stripe, metrics = noMetrics }: PaymentsDeps): PaymentsFeature {
  const prices = new PriceList(sheets);
  const mppSecret = createHmac('sha256', serviceSecret).update('mpp-challenge-binding').digest('hex');
  const realm = new URL(config.baseUrl).host;
  let settings: Promise<PaymentsConfig> | undefined;
  let engines: Promise<PaymentEngines> | undefined;
  // The settings are read as the app starts (the payment gate asks): /openapi.json's offers come
  // from them, and the test networks' wallet is read (or made) with them. The protocols' SDKs,
  // and viem under both, load at the first 402 or payment: a process that takes none never has them.
  const readSettings = () =>
    (settings ??= paymentsInForce(config, database).then((payments) => {
      if (payments.testNetwork) log.warn({ payTo: payments.x402.payTo, network: payments.x402.network }, `pay-per-request on test networks, paid to ${payments.x402.payTo}`);
      return payments;
    }));
  const loadEngines = () =>
    (engines ??= Promise.all([import('./x402.ts'), import('./mpp.ts'), readSettings()]).then(([{ X402Acceptance }, { MppAcceptance }, payments]) => ({
      x402: new X402Acceptance(payments.x402, payments.settleTimeoutMs, prices),
      mpp: new MppAcceptance(payments, mppSecret, realm, stripe, prices),
    })));
  const gaps = offerAvailability(config.payments, stripe !== undefined).unavailable;
  const service = new PaymentService(prices, new PaymentRepository(database), { settings: readSettings, engines: loadEngines }, gaps, mppSecret, (carried) => testModeNotice(config.payments, carried));
  if (gaps.length > 0) {
    log.warn({ unavailable: gaps }, `pay-per-request: some offers cannot be taken: ${gaps.map((g) => g.reason).join(' ')}`);
  }
  return {
    service,
    plugins: [paymentGate({ payments: service, baseUrl: config.baseUrl, rateLimitPerMinute: config.agents.rateLimits.anonymous, metrics })],
    operations: bindOperations(paymentOperations, service),
    jobs: [{ name: 'payment-reconcile', everyMs: RECONCILE_EVERY_MS, run: () => service.reconcile() }],
  };
}
