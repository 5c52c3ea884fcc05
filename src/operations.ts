import { agentOperations } from './agents/operations.ts';
import { alertOperations } from './alerts/operations.ts';
import { billingOperations } from './billing/operations.ts';
import { conversionOperations } from './conversions/operations.ts';
import { priceSheetOf, type Operation, type OperationDeclaration, type PricedOperation } from './core/operations.ts';
import { discoveryOperations } from './discovery/operations.ts';
import { dispatchOperations } from './dispatch/operations.ts';
import { healthOperations } from './health/operations.ts';
import { inventoryOperations } from './inventory/operations.ts';
import { klaviyoOperations } from './klaviyo/operations.ts';
import { paymentOperations } from './payments/operations.ts';
import { purchasingOperations } from './purchasing/operations.ts';
import { storeOperations } from './stores/operations.ts';
import { webhookOperations } from './webhooks/operations.ts';
import { PLATFORMS } from './platforms.ts';

/**
 * The one list of declared operations, module by module: what the price list, the OpenAPI
 * payment info, the agent skills' price table and the tenancy walk read before any service
 * exists. Each module binds its own to its service (`bindOperations` in its feature.ts); the
 * assembly checks that every declaration here is served exactly once.
 */
export const declaredOperations: ReadonlyArray<OperationDeclaration<never>> = [
  ...healthOperations,
  ...discoveryOperations,
  ...agentOperations,
  ...storeOperations,
  ...webhookOperations,
  ...klaviyoOperations,
  ...inventoryOperations,
  ...dispatchOperations,
  ...conversionOperations,
  ...purchasingOperations,
  ...PLATFORMS.flatMap((platform) => platform.operations ?? []),
  ...alertOperations,
  ...paymentOperations,
  ...billingOperations,
] as never;

/** The price sheet of every declared paid operation. */
export function declaredPrices(): PricedOperation[] {
  return declaredOperations.flatMap((declaration) => priceSheetOf(declaration) ?? []);
}

/** Refuses to start when the served operations are not exactly the declared ones (one bound twice, or never). */
export function checkServed(operations: Operation[]): void {
  const served = operations.map((operation) => operation.declaration.id);
  const declared = declaredOperations.map((declaration) => declaration.id);
  const twice = served.filter((id, i) => served.indexOf(id) !== i);
  const unserved = declared.filter((id) => !served.includes(id));
  const undeclared = served.filter((id) => !declared.includes(id));
  if (twice.length + unserved.length + undeclared.length > 0) {
    throw new Error(`Operations served twice: ${twice.join(', ') || 'none'}; declared but not served: ${unserved.join(', ') || 'none'}; served but not in src/operations.ts: ${undeclared.join(', ') || 'none'}.`);
  }
}
