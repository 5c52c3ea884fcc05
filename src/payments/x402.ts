// Longer than most files on purpose: x402 from offer to settlement, with the offline checks of an
// EIP-3009 authorisation and the bound on facilitator calls, so one file says what reaches the network.
import { HTTPFacilitatorClient, FacilitatorTimeoutError } from '@x402/core/http';
import { x402ResourceServer } from '@x402/core/server';
import type { PaymentPayload, PaymentRequired, PaymentRequirements, SettleResponse } from '@x402/core/types';
import { authorizationTypes } from '@x402/evm';
import { ExactEvmScheme } from '@x402/evm/exact/server';
import { getAddress, recoverTypedDataAddress, type Address, type Hex } from 'viem';
import type { PaymentsConfig } from '../config.ts';
import { Problem, ServiceUnavailable } from '../core/problems.ts';
import { unreadableX402Payment } from './pipeline.ts';
import { x402Requirements, type PaidOperation, type PriceList } from './offers.ts';

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

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const NONCE = /^0x[0-9a-fA-F]{64}$/;
/** A uint256 as the exact scheme writes it: decimal digits. */
const UINT256 = /^(0|[1-9][0-9]{0,77})$/;
/** An externally owned account's ECDSA signature (r, s, v): the only kind recovered offline. */
const EOA_SIGNATURE = /^0x[0-9a-fA-F]{130}$/;
/** The facilitator refuses an authorisation that ends sooner than this: settling takes time. */
const SETTLE_MARGIN_SECONDS = 6n;
/** How soon a client refused for a busy facilitator may try again. */
const BUSY_RETRY_AFTER_SECONDS = 1;

/** An EIP-3009 TransferWithAuthorization as signed, parsed from the payload's strings. */
interface Authorization {
  from: Address;
  to: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
}

/** A payment payload that passed the offline checks: the offer it matches, its payer and nonce. */
export interface X402Check {
  payload: PaymentPayload;
  requirements: PaymentRequirements;
  payer: string;
  nonce: string;
}

/** `reason`: what the ledger keeps, the facilitator's words included; `code`: the x402 error code alone, all a client is told. */
export type SettleOutcome =
  | { kind: 'settled'; response: SettleResponse }
  | { kind: 'failed'; reason: string; code: string }
  | { kind: 'unknown'; reason: string };

/**
 * x402 v2 through `@x402/core` and `@x402/evm`'s exact scheme (EIP-3009 transfers), verified and
 * settled by the configured facilitator. Requirements are built here from the configuration,
 * so a 402 needs no call to the facilitator; the facilitator is first asked when a payment arrives.
 */
export class X402Acceptance {
  private readonly server: x402ResourceServer | undefined;
  private initialised: Promise<void> | undefined;
  private readonly facilitatorCalls: Slots;
  /** The EIP-712 domain the token signs under: a signature for another token or chain recovers someone else. */
  private readonly domain: { name: string; version: string; chainId: number; verifyingContract: Address };

  constructor(
    private readonly config: PaymentsConfig['x402'],
    private readonly settleTimeoutMs: number,
    private readonly prices: PriceList,
  ) {
    this.facilitatorCalls = new Slots(config.facilitatorConcurrency);
    this.domain = {
      name: config.assetName,
      version: config.assetVersion,
      chainId: Number(config.network.slice('eip155:'.length)),
      verifyingContract: getAddress(config.asset),
    };
    if (!config.payTo) return;
    const facilitator = new HTTPFacilitatorClient({ url: config.facilitatorUrl, timeoutMs: settleTimeoutMs });
    this.server = new x402ResourceServer(facilitator).register(config.network as `${string}:${string}`, new ExactEvmScheme());
  }

  requirements(operation: PaidOperation): PaymentRequirements[] {
    return x402Requirements(this.config, this.prices.of(operation));
  }

  paymentRequired(operation: PaidOperation, resourceUrl: string, error?: string): PaymentRequired {
    return {
      x402Version: 2,
      ...(error ? { error } : {}),
      resource: { url: resourceUrl, description: this.prices.of(operation).description, mimeType: 'application/json' },
      accepts: this.requirements(operation),
    };
  }

  /**
   * The offline checks of a payment payload as its transport decoded it: its shape, the version,
   * the offer it matches exactly, and the EIP-3009 authorisation and its signature. The
   * facilitator checks the rest (balance, nonce on chain).
   */
  async check(payload: PaymentPayload, operation: PaidOperation): Promise<X402Check> {
    if (!isObject(payload) || !isObject(payload.accepted) || !isObject(payload.payload)) throw unreadableX402Payment();
    if (!this.prices.of(operation).x402) {
      throw new Problem('payment-method-unavailable', `x402 does not pay for ${operation}: what it buys may have to be refunded, and a transfer cannot be. Pay with MPP, or call with an access token.`);
    }
    if (!this.server) {
      throw new Problem('payment-method-unavailable', 'x402 payments need X402_PAY_TO (the address paid); it is not set.', {
        extensions: { method: 'x402', missing: ['X402_PAY_TO'] },
      });
    }
    if (payload.x402Version !== 2) {
      throw new Problem('malformed-credential', `Only x402 version 2 is accepted (PAYMENT-SIGNATURE); this payload says ${Number.isSafeInteger(payload.x402Version) ? `version ${String(payload.x402Version)}` : 'no version'}.`);
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
    const { authorization, signature } = readAuthorization(payload.payload);
    await this.checkAuthorization(authorization, signature, requirements);
    return { payload, requirements, payer: authorization.from.toLowerCase(), nonce: authorization.nonce.toLowerCase() };
  }

  /**
   * What the facilitator would check first, checked here so that a forged or mistaken proof costs
   * neither a ledger row nor a call out: the terms signed are the offer's (recipient, value), the
   * window is open long enough to settle, and the signature over the token's EIP-712 domain (its
   * asset and chain) recovers `from`. Balance and nonce are the chain's, left to the facilitator.
   */
  private async checkAuthorization(authorization: Authorization, signature: Hex, requirements: PaymentRequirements): Promise<void> {
    if (authorization.to !== getAddress(requirements.payTo)) {
      throw offlineRefusal('payment-insufficient', 'recipient_mismatch', `The authorization pays ${authorization.to}, not ${getAddress(requirements.payTo)} as the offer says.`);
    }
    if (authorization.value !== BigInt(requirements.amount)) {
      throw offlineRefusal('payment-insufficient', 'value_mismatch', `The authorization transfers ${authorization.value}, not the price of ${requirements.amount}.`);
    }
    const now = BigInt(Math.floor(Date.now() / 1000));
    if (authorization.validAfter > now) {
      throw offlineRefusal('payment-expired', 'valid_after_in_future', `The authorization is not valid before ${authorization.validAfter} (Unix time); it is ${now}.`);
    }
    if (authorization.validBefore < now + SETTLE_MARGIN_SECONDS) {
      throw offlineRefusal('payment-expired', 'valid_before_expired', `The authorization ends at ${authorization.validBefore} (Unix time), too soon to settle; it is ${now}.`);
    }
    let signer: Address | undefined;
    try {
      signer = await recoverTypedDataAddress({
        domain: this.domain,
        types: authorizationTypes,
        primaryType: 'TransferWithAuthorization',
        message: authorization,
        signature,
      });
    } catch {
      signer = undefined;
    }
    if (signer !== authorization.from) {
      throw offlineRefusal('verification-failed', 'invalid_signature', `The signature is not ${authorization.from}'s over this authorization for ${this.config.assetName} on ${this.config.network}.`);
    }
  }

  /**
   * Runs `work` (the ledger claim and the facilitator's verification) while holding one of the
   * facilitator's slots. None free: 503 at once, before any row, rather than a queue that grows
   * with the attack.
   */
  async verifying<T>(work: () => Promise<T>): Promise<T> {
    if (!this.facilitatorCalls.tryTake()) {
      throw new ServiceUnavailable(
        `Too many x402 payments are being verified at once (${this.config.facilitatorConcurrency}); nothing was recorded or charged, retry in ${BUSY_RETRY_AFTER_SECONDS} s.`,
        BUSY_RETRY_AFTER_SECONDS,
      );
    }
    try {
      return await work();
    } finally {
      this.facilitatorCalls.give();
    }
  }

  /** The facilitator's verification: signature, time window, amount, recipient, balance, nonce. Call within `verifying`. */
  async verify(payload: PaymentPayload, requirements: PaymentRequirements): Promise<void> {
    await this.ready();
    let result;
    try {
      result = await this.server!.verifyPayment(payload, requirements);
    } catch (err) {
      throw unreachable(err);
    }
    if (!result.isValid) throw refusal(result.invalidReason);
  }

  /**
   * Settles after the handler succeeded. A timeout is "unknown", to be reconciled; so is a
   * facilitator too busy to take it within the settlement timeout (settlements wait for a slot,
   * ahead of new verifications, since the work they pay for is done).
   */
  async settle(payload: PaymentPayload, requirements: PaymentRequirements): Promise<SettleOutcome> {
    if (!(await this.facilitatorCalls.take(this.settleTimeoutMs))) {
      return { kind: 'unknown', reason: 'the facilitator was busy with other payments' };
    }
    try {
      return await this.settleNow(payload, requirements);
    } finally {
      this.facilitatorCalls.give();
    }
  }

  private async settleNow(payload: PaymentPayload, requirements: PaymentRequirements): Promise<SettleOutcome> {
    try {
      const response = await this.server!.settlePayment(payload, requirements);
      if (response.success) return { kind: 'settled', response };
      const reason = [response.errorReason, response.errorMessage].filter(Boolean).join(': ') || 'settlement refused';
      // Only the payer's side can make a settlement impossible; anything else (a transaction
      // that did not go through) may succeed later, while the authorisation is valid.
      return PAYER_FAULT.test(response.errorReason ?? '') ? { kind: 'failed', reason, code: errorCode(response.errorReason) } : { kind: 'unknown', reason };
    } catch (err) {
      if (err instanceof FacilitatorTimeoutError) return { kind: 'unknown', reason: 'the facilitator did not answer in time' };
      const reason = (err as { errorReason?: string }).errorReason;
      if (reason) return { kind: 'failed', reason, code: errorCode(reason) };
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

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The exact scheme's `{authorization, signature}`, parsed into typed values before anything reads them. */
function readAuthorization(payload: unknown): { authorization: Authorization; signature: Hex } {
  const { authorization: a, signature } = (isObject(payload) ? payload : {}) as { authorization?: Record<string, unknown>; signature?: unknown };
  const text = (value: unknown, pattern: RegExp) => typeof value === 'string' && pattern.test(value);
  if (
    !isObject(a) ||
    !text(a.from, ADDRESS) ||
    !text(a.to, ADDRESS) ||
    !text(a.value, UINT256) ||
    !text(a.validAfter, UINT256) ||
    !text(a.validBefore, UINT256) ||
    !text(a.nonce, NONCE)
  ) {
    throw new Problem(
      'malformed-credential',
      'The exact scheme needs an EIP-3009 authorization: `from` and `to` addresses, `value`, `validAfter` and `validBefore` as decimal strings, and a 32-byte hex `nonce`.',
    );
  }
  if (typeof signature !== 'string' || !EOA_SIGNATURE.test(signature)) {
    throw offlineRefusal(
      'verification-failed',
      'unsupported_signature',
      'The signature must be a 65-byte ECDSA signature of the paying account, checked before the payment is accepted; smart-contract wallet signatures are not accepted.',
    );
  }
  return {
    authorization: {
      from: getAddress(a.from as string),
      to: getAddress(a.to as string),
      value: BigInt(a.value as string),
      validAfter: BigInt(a.validAfter as string),
      validBefore: BigInt(a.validBefore as string),
      nonce: a.nonce as Hex,
    },
    signature: signature as Hex,
  };
}

/** A proof refused before the ledger and the facilitator: a 402, with the reason code the facilitator would give. */
function offlineRefusal(slug: 'payment-insufficient' | 'payment-expired' | 'verification-failed', reason: string, detail: string): Problem {
  return new Problem(slug, `The payment was refused before it was recorded: ${detail}`, { extensions: { reason } });
}

/**
 * A counting semaphore. `tryTake` refuses when every slot is held; `take` waits its turn, at most
 * `timeoutMs`, and waiters are served before any new `tryTake`, so settlements of work already
 * done are not starved by new verifications.
 */
class Slots {
  private held = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly size: number) {}

  tryTake(): boolean {
    if (this.held >= this.size || this.waiting.length > 0) return false;
    this.held++;
    return true;
  }

  take(timeoutMs: number): Promise<boolean> {
    if (this.tryTake()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const grant = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        const index = this.waiting.indexOf(grant);
        if (index >= 0) this.waiting.splice(index, 1);
        resolve(false);
      }, timeoutMs);
      this.waiting.push(grant);
    });
  }

  /** Hands the slot to the first waiter, if any: `held` stays as it is. */
  give(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.held--;
  }
}

function unreachable(err: unknown): Problem {
  if (err instanceof Problem) return err;
  const reason = (err as { invalidReason?: string }).invalidReason;
  if (reason) return refusal(reason);
  return new Problem('payment-network-unreachable', 'The x402 facilitator could not be reached or did not answer; nothing was charged.', {
    headers: { 'retry-after': '5' },
  });
}

/**
 * An x402 error code as a client may see it. A facilitator's free-form message (a library's dump
 * of the contract call, its version, addresses) is never passed on, and neither is a code that
 * is not one.
 */
function errorCode(reason: string | undefined): string {
  return reason !== undefined && /^[a-z0-9_]{1,64}$/.test(reason) ? reason : 'invalid_payment';
}

/** The facilitator's reason codes, sorted into the MPP problem types clients already know. */
function refusal(reason: string | undefined): Problem {
  const code = errorCode(reason);
  const detail = `The facilitator refused the payment: ${code}.`;
  const extensions = { reason: code };
  if (/valid_before|valid_after|expired/.test(code)) return new Problem('payment-expired', detail, { extensions });
  if (/recipient|value|amount|insufficient_funds|insufficient_balance|mismatch/.test(code)) return new Problem('payment-insufficient', detail, { extensions });
  return new Problem('verification-failed', detail, { extensions });
}
