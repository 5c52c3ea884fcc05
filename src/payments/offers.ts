/**
 * What each paid operation costs and how it may be paid: the seed's offers, in one place that
 * the 402 answers, the MPP challenges, the x402 requirements and `/openapi.json` all read.
 */
import type { PaymentsConfig } from '../config.ts';

export type PaidOperation = 'subscribeAlert' | 'checkoutPlan' | 'getApiIndex';
export type MppMethod = 'stripe' | 'tempo' | 'card';
export type MppIntent = 'charge' | 'session';

export interface MppOffer {
  method: MppMethod;
  intent: MppIntent;
  description: string;
}

export interface PriceSheet {
  operation: PaidOperation;
  /** USD cents: exact arithmetic, and the base unit MPP discovery states amounts in. */
  usdCents: number;
  description: string;
  mpp: MppOffer[];
  /** Whether x402 pays for it: a transfer cannot be given back, so not for what may have to be refunded. */
  x402: boolean;
}

const perRequestCharges: MppOffer[] = [
  { method: 'stripe', intent: 'charge', description: 'Per-alert processing fee, paid by card through Stripe' },
  { method: 'tempo', intent: 'charge', description: 'Micro-payment charge on the Tempo network' },
];

export const priceSheets: Record<PaidOperation, PriceSheet> = {
  subscribeAlert: {
    operation: 'subscribeAlert',
    usdCents: 5,
    description: 'Restock alert subscription (per-alert processing fee)',
    mpp: perRequestCharges,
    x402: true,
  },
  checkoutPlan: {
    operation: 'checkoutPlan',
    usdCents: 999,
    description: 'Starter plan (bring your own e-mail provider key), monthly',
    mpp: [
      { method: 'stripe', intent: 'session', description: 'Starter plan (bring your own e-mail provider key), monthly, paid through Stripe' },
      { method: 'card', intent: 'session', description: 'Credit/debit card checkout session for the starter plan, monthly' },
    ],
    // Paid without a token, a checkout is a proposal the store's owner may decline, and is then
    // refunded (docs/plans.md); an x402 transfer cannot be, so it is not offered.
    x402: false,
  },
  // The seed names no price for the API index; it costs what one paid request costs.
  getApiIndex: {
    operation: 'getApiIndex',
    usdCents: 5,
    description: 'The API index (per-request fee)',
    mpp: perRequestCharges,
    x402: true,
  },
};

/** USD cents as the decimal string MPP route requests take ("0.05"). */
export function usdDecimal(cents: number): string {
  return (cents / 100).toFixed(2);
}

/** A USD price in the base units of a token with `decimals` decimals (USDC: 0.05 → 50000). */
export function tokenAmount(cents: number, decimals: number): string {
  if (decimals < 2) return (BigInt(cents) / 10n ** BigInt(2 - decimals)).toString();
  return (BigInt(cents) * 10n ** BigInt(decimals - 2)).toString();
}

/** The x402 requirements of an operation from the settings alone (none without an address to pay). */
export function x402Requirements(config: PaymentsConfig['x402'], operation: PaidOperation) {
  if (!config.payTo || !priceSheets[operation].x402) return [];
  const { network, asset, assetName, assetVersion, assetDecimals, payTo, maxTimeoutSeconds } = config;
  return [
    {
      scheme: 'exact',
      network: network as `${string}:${string}`,
      amount: tokenAmount(priceSheets[operation].usdCents, assetDecimals),
      asset,
      payTo,
      maxTimeoutSeconds,
      extra: { name: assetName, version: assetVersion },
    },
  ];
}

/**
 * `x-payment-info` of an operation: the MPP discovery draft's offers (amounts as base-unit
 * strings), and the x402 requirements a 402 for it holds, when this deployment takes x402.
 */
export function paymentInfo(sheet: PriceSheet, accepts: unknown[]) {
  return {
    offers: sheet.mpp.map((offer) => ({
      intent: offer.intent,
      method: offer.method,
      amount: String(sheet.usdCents),
      currency: 'usd',
      description: offer.description,
    })),
    ...(accepts.length > 0 ? { x402: { x402Version: 2, accepts } } : {}),
  };
}

/** An offer this deployment cannot take, and the settings that would make it available. */
export interface Unavailable {
  protocol: 'x402' | 'mpp';
  method: string;
  intent?: string;
  /** Settings that would make it available. */
  missing?: string[];
  reason: string;
}

/**
 * Which offers this deployment can take, from its settings alone: the 402's list of gaps and the
 * MPP methods to make, decided without loading either protocol's SDK. `stripe` says whether a
 * Stripe client was made (STRIPE_SECRET_KEY is set).
 */
export function offerAvailability(config: PaymentsConfig, stripe: boolean): { mpp: Set<`${MppMethod}/${MppIntent}`>; unavailable: Unavailable[] } {
  const unavailable: Unavailable[] = [];
  const mpp = new Set<`${MppMethod}/${MppIntent}`>();
  // On test networks both pay the wallet the service keeps (payments/wallet.ts).
  if (!config.x402.payTo && !config.testNetwork) {
    unavailable.push({ protocol: 'x402', method: 'exact', missing: ['X402_PAY_TO'], reason: 'x402 payments need the address to pay (X402_PAY_TO).' });
  }
  const { secretKey: stripeKey, networkId } = config.stripe;
  if (stripe && networkId) {
    mpp.add('stripe/charge').add('stripe/session');
  } else {
    const missing = [!stripeKey && 'STRIPE_SECRET_KEY', !networkId && 'STRIPE_NETWORK_ID'].filter((name): name is string => Boolean(name));
    unavailable.push({ protocol: 'mpp', method: 'stripe', missing, reason: `Stripe payments need ${missing.join(' and ')}.` });
  }
  if (config.tempo.recipient || config.testNetwork) mpp.add('tempo/charge');
  else unavailable.push({ protocol: 'mpp', method: 'tempo', missing: ['MPP_TEMPO_RECIPIENT'], reason: 'Tempo payments need the address to pay (MPP_TEMPO_RECIPIENT) and a Tempo RPC.' });
  // Card sessions carry an encrypted network token that only a card processor can charge, and
  // the one SDK for it is not open source: offered as the seed lists it, refused when used.
  mpp.add('card/session');
  unavailable.push({ protocol: 'mpp', method: 'card', intent: 'session', reason: 'Card checkout sessions need a card processor; none is configured. Pay with stripe or x402.' });
  return { mpp, unavailable };
}
