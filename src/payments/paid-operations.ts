import type { z } from 'zod';
import type { subscribeAlertBody, subscribeAlertResponse } from '../alerts/schemas.ts';
import type { checkoutPlanBody, checkoutPlanResponse } from '../billing/schemas.ts';
import type { FieldError } from '../core/problems.ts';
import { priceSheets, usdDecimal, type PaidOperation, type PriceSheet } from './offers.ts';

/**
 * What the pay-per-request pipeline needs to know of one paid operation. The pipeline, the HTTP
 * gate and the paid MCP tools know no feature's fields: whatever they need of the input or of
 * the result is declared here, typed by the operation's own schemas, so a renamed field fails
 * to compile instead of silently recording nothing.
 */
export interface PaidOperationDeclaration<Input, Result> {
  /** What it costs and how it may be paid. */
  price: PriceSheet;
  /** The store the payment is for, so that the store's owner finds it in the ledger. */
  storeOf(input: Input): string | null | undefined;
  /** True when the price covers this input; otherwise the field it does not, refused before any charge. */
  admits(input: Input): true | FieldError;
  /** What the payment bought, recorded in the ledger as the payment's result. */
  resultReference(result: Result): string | null | undefined;
}

/** The validated input of each operation: its HTTP body, which is also its MCP tool's arguments. */
interface Inputs {
  subscribeAlert: z.output<typeof subscribeAlertBody>;
  checkoutPlan: z.output<typeof checkoutPlanBody>;
  getApiIndex: undefined;
}

/** What each operation answers when it succeeds. */
interface Results {
  subscribeAlert: z.output<typeof subscribeAlertResponse>;
  checkoutPlan: z.output<typeof checkoutPlanResponse>;
  getApiIndex: unknown;
}

type Declarations = { [O in PaidOperation]: PaidOperationDeclaration<Inputs[O], Results[O]> };

/** The validated input of a paid operation. */
export type PaidInput<O extends PaidOperation> = Inputs[O];

const anyInput = (): true => true;

export const paidOperations: Declarations = {
  subscribeAlert: {
    price: priceSheets.subscribeAlert,
    storeOf: (input) => input.shop,
    admits: anyInput,
    resultReference: (result) => result.subscriptionId,
  },
  checkoutPlan: {
    price: priceSheets.checkoutPlan,
    storeOf: (input) => input.shop,
    // The offer prices the starter plan; the others are bought with a token and the checkout page.
    admits: (input) =>
      input.plan === 'starter' || {
        pointer: '/body/plan',
        message: `paying per request buys the starter plan (USD ${usdDecimal(priceSheets.checkoutPlan.usdCents)} a month); other plans are bought with an access token`,
      },
    resultReference: (result) => result.sessionId,
  },
  getApiIndex: {
    price: priceSheets.getApiIndex,
    storeOf: () => null,
    admits: anyInput,
    resultReference: () => null,
  },
};

/**
 * The declaration of an operation, for input and results the transports have validated against
 * its schemas. A name without one is refused where it is wired (a route's config, a tool),
 * never at the first payment.
 */
export function declarationOf(operation: PaidOperation): PaidOperationDeclaration<unknown, unknown> {
  if (!Object.hasOwn(paidOperations, operation)) {
    throw new Error(`"${String(operation)}" is not a declared paid operation: declare it in src/payments/paid-operations.ts`);
  }
  return paidOperations[operation] as PaidOperationDeclaration<never, never> as PaidOperationDeclaration<unknown, unknown>;
}
