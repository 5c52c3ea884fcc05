/**
 * What each paid operation costs and how it may be paid. The prices are the operations' own
 * declarations (`paid.price` in each module's operations.ts); this file turns them into what the
 * 402 answers, the MPP challenges, the x402 requirements and `/openapi.json` carry.
 */
import type { PaymentsConfig } from '../config.ts';
import type { MppIntent, MppMethod, PriceSheet } from '../core/operations.ts';

/** A paid operation, by its `operationId`. */
export type PaidOperation = string;

/** The price sheets of the declared paid operations, by operation. */
export class PriceList {
  private readonly sheets: ReadonlyMap<PaidOperation, PriceSheet>;

  constructor(sheets: Iterable<PriceSheet>) {
    this.sheets = new Map([...sheets].map((sheet) => [sheet.operation, sheet]));
  }

  /** The sheet of a declared paid operation; a name without one is a wiring mistake, refused at once. */
  of(operation: PaidOperation): PriceSheet {
    const sheet = this.sheets.get(operation);
    if (!sheet) throw new Error(`"${operation}" is not a declared paid operation: give its declaration \`paid\` terms`);
    return sheet;
  }

  operations(): PaidOperation[] {
    return [...this.sheets.keys()];
  }
}

/** A USD price in the base units of a token with `decimals` decimals (USDC: 0.05 → 50000). */
export function tokenAmount(cents: number, decimals: number): string {
  if (decimals < 2) return (BigInt(cents) / 10n ** BigInt(2 - decimals)).toString();
  return (BigInt(cents) * 10n ** BigInt(decimals - 2)).toString();
}

/** The x402 requirements of an operation from the settings alone (none without an address to pay). */
export function x402Requirements(config: PaymentsConfig['x402'], sheet: PriceSheet) {
  if (!config.payTo || !sheet.x402) return [];
  const { network, asset, assetName, assetVersion, assetDecimals, payTo, maxTimeoutSeconds } = config;
  return [
    {
      scheme: 'exact',
      network: network as `${string}:${string}`,
      amount: tokenAmount(sheet.usdCents, assetDecimals),
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

/** The reference a card session taken in test mode leaves in the ledger and its receipt: nothing was charged. */
export const TEST_CARD_REFERENCE_PREFIX = 'test_card_';

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
  // the one SDK for it is not open source. Beside the hosted test checkout the card session is
  // that page's, in test mode; beside a real checkout it is offered as the seed lists it and
  // refused when used.
  mpp.add('card/session');
  if (!config.card.testCheckout) {
    unavailable.push({ protocol: 'mpp', method: 'card', intent: 'session', reason: 'Card checkout sessions need a card processor; none is configured.' });
  }
  return { mpp, unavailable };
}
