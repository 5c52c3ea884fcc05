import { HTTPFacilitatorClient, FacilitatorTimeoutError } from '@x402/core/http';
import { x402ResourceServer } from '@x402/core/server';
import type { PaymentPayload, PaymentRequired, PaymentRequirements, SettleResponse } from '@x402/core/types';
import { ExactEvmScheme } from '@x402/evm/exact/server';
import type { PaymentsConfig } from '../config.ts';
import { Problem } from '../core/problems.ts';
import { priceSheets, tokenAmount, type PaidOperation } from './offers.ts';

/** A PAYMENT-SIGNATURE the facilitator accepted, waiting for the handler's outcome. */
export interface X402Payment {
  payload: PaymentPayload;
  requirements: PaymentRequirements;
  payer: string;
  nonce: string;
  amount: string;
}

/** Facilitator reasons that no retry can change: funds, nonce, time window, signature, terms. */
const PAYER_FAULT = /insufficient|nonce_already_used|valid_before|valid_after|signature|recipient|value|mismatch|expired/;

/** A payment payload that passed the offline checks: the offer it matches, its payer and nonce. */
export interface X402Check {
  payload: PaymentPayload;
  requirements: PaymentRequirements;
  payer: string;
  nonce: string;
}

export type SettleOutcome =
  | { kind: 'settled'; response: SettleResponse }
  | { kind: 'failed'; reason: string }
  | { kind: 'unknown'; reason: string };

/**
 * x402 v2 through `@x402/core` and `@x402/evm`'s exact scheme (EIP-3009 transfers), verified and
 * settled by the configured facilitator. Requirements are built here from the configuration,
 * so a 402 needs no call to the facilitator; the facilitator is first asked when a payment arrives.
 */
export class X402Acceptance {
  private readonly server: x402ResourceServer | undefined;
  private initialised: Promise<void> | undefined;

  constructor(private readonly config: PaymentsConfig['x402'], settleTimeoutMs: number) {
    if (!config.payTo) return;
    const facilitator = new HTTPFacilitatorClient({ url: config.facilitatorUrl, timeoutMs: settleTimeoutMs });
    this.server = new x402ResourceServer(facilitator).register(config.network as `${string}:${string}`, new ExactEvmScheme());
  }

  get available(): boolean {
    return this.server !== undefined;
  }

  requirements(operation: PaidOperation): PaymentRequirements[] {
    if (!this.config.payTo) return [];
    const { network, asset, assetName, assetVersion, assetDecimals, payTo, maxTimeoutSeconds } = this.config;
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

  paymentRequired(operation: PaidOperation, resourceUrl: string, error?: string): PaymentRequired {
    return {
      x402Version: 2,
      ...(error ? { error } : {}),
      resource: { url: resourceUrl, description: priceSheets[operation].description, mimeType: 'application/json' },
      accepts: this.requirements(operation),
    };
  }

  /**
   * The offline checks of a payment payload as its transport decoded it: its shape, the version,
   * the offer it matches exactly, and the EIP-3009 authorisation. The facilitator checks the rest.
   */
  check(payload: PaymentPayload, operation: PaidOperation): X402Check {
    if (!isObject(payload) || !isObject(payload.accepted) || !isObject(payload.payload)) throw unreadableX402Payment();
    if (!this.server) {
      throw new Problem('payment-method-unavailable', 'x402 payments need X402_PAY_TO (the address paid); it is not set.', {
        extensions: { method: 'x402', missing: ['X402_PAY_TO'] },
      });
    }
    if (payload.x402Version !== 2) {
      throw new Problem('malformed-credential', `Only x402 version 2 is accepted (PAYMENT-SIGNATURE); this payload says version ${String(payload.x402Version)}.`);
    }
    let requirements: PaymentRequirements | undefined;
    try {
      requirements = this.server.findMatchingRequirements(this.requirements(operation), payload);
    } catch {
      requirements = undefined;
    }
    if (!requirements) {
      throw new Problem('payment-insufficient', 'The payment does not match the offer for this operation (scheme, network, amount, asset or recipient).');
    }
    const authorization = (payload.payload as { authorization?: { from?: unknown; nonce?: unknown } }).authorization;
    if (typeof authorization?.from !== 'string' || typeof authorization.nonce !== 'string') {
      throw new Problem('malformed-credential', 'The exact scheme needs an EIP-3009 authorization with `from` and `nonce`.');
    }
    return { payload, requirements, payer: authorization.from.toLowerCase(), nonce: authorization.nonce.toLowerCase() };
  }

  /** The facilitator's verification: signature, time window, amount, recipient, balance, nonce. */
  async verify(payload: PaymentPayload, requirements: PaymentRequirements): Promise<void> {
    await this.ready();
    let result;
    try {
      result = await this.server!.verifyPayment(payload, requirements);
    } catch (err) {
      throw unreachable(err);
    }
    if (!result.isValid) throw refusal(result.invalidReason, result.invalidMessage);
  }

  /** Settles after the handler succeeded. A timeout is "unknown", to be reconciled. */
  async settle(payload: PaymentPayload, requirements: PaymentRequirements): Promise<SettleOutcome> {
    try {
      const response = await this.server!.settlePayment(payload, requirements);
      if (response.success) return { kind: 'settled', response };
      const reason = [response.errorReason, response.errorMessage].filter(Boolean).join(': ') || 'settlement refused';
      // Only the payer's side can make a settlement impossible; anything else (a transaction
      // that did not go through) may succeed later, while the authorisation is valid.
      return PAYER_FAULT.test(response.errorReason ?? '') ? { kind: 'failed', reason } : { kind: 'unknown', reason };
    } catch (err) {
      if (err instanceof FacilitatorTimeoutError) return { kind: 'unknown', reason: 'the facilitator did not answer in time' };
      const reason = (err as { errorReason?: string }).errorReason;
      if (reason) return { kind: 'failed', reason };
      return { kind: 'unknown', reason: (err as Error).message.split('\n')[0] ?? 'settlement error' };
    }
  }

  private ready(): Promise<void> {
    this.initialised ??= this.server!.initialize().catch((err) => {
      this.initialised = undefined;
      throw unreachable(err);
    });
    return this.initialised;
  }
}

/** A proof that is not an x402 v2 payment payload, whichever transport carried it. */
export function unreadableX402Payment(): Problem {
  return new Problem('malformed-credential', 'PAYMENT-SIGNATURE is not base64 JSON of an x402 v2 payment payload (`x402Version`, `accepted`, `payload`).');
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function unreachable(err: unknown): Problem {
  if (err instanceof Problem) return err;
  const reason = (err as { invalidReason?: string }).invalidReason;
  if (reason) return refusal(reason, (err as Error).message);
  return new Problem('payment-network-unreachable', `The x402 facilitator did not answer: ${(err as Error).message?.split('\n')[0]}`, {
    headers: { 'retry-after': '5' },
  });
}

/** The facilitator's reason codes, sorted into the MPP problem types clients already know. */
function refusal(reason: string | undefined, message: string | undefined): Problem {
  const code = reason ?? 'invalid_payment';
  const detail = `The facilitator refused the payment: ${code}${message ? ` (${message})` : ''}.`;
  const extensions = { reason: code };
  if (/valid_before|valid_after|expired/.test(code)) return new Problem('payment-expired', detail, { extensions });
  if (/recipient|value|amount|insufficient_funds|insufficient_balance|mismatch/.test(code)) return new Problem('payment-insufficient', detail, { extensions });
  return new Problem('verification-failed', detail, { extensions });
}
