import { z } from 'zod';
import type { HoldRequest, UnitHold, UnitHolds } from '../dispatch/service.ts';
import type { AdminApi } from './admin-api.ts';
import { UpstreamError } from './shopify-api.ts';

/**
 * A unit held for one shopper: a draft order of one unit of the variant, its inventory reserved
 * until the hold ends (`DraftOrderInput.reserveInventoryUntil`), checked out at its invoice URL.
 * The alert's id rides along as a custom attribute, which Shopify copies to the order's
 * `note_attributes`, so the order names the alert it came from (docs/shopify.md, "Held units").
 *
 * https://shopify.dev/docs/api/admin-graphql/2026-07/mutations/draftOrderCreate
 * https://shopify.dev/docs/api/admin-graphql/2026-07/input-objects/DraftOrderInput
 * https://shopify.dev/docs/api/admin-graphql/2026-07/mutations/draftOrderDelete
 */
const DRAFT_ORDER_CREATE = `mutation RestockHoldUnit($input: DraftOrderInput!) {
  draftOrderCreate(input: $input) { draftOrder { id invoiceUrl reserveInventoryUntil } userErrors { field message } }
}`;

const DRAFT_ORDER_STATUS = `query RestockHeldUnit($id: ID!) { node(id: $id) { ... on DraftOrder { id status } } }`;

const DRAFT_ORDER_DELETE = `mutation RestockReleaseUnit($input: DraftOrderDeleteInput!) {
  draftOrderDelete(input: $input) { deletedId userErrors { field message } }
}`;

const userErrors = z.array(z.object({ field: z.array(z.string()).nullable().optional(), message: z.string() }));
const created = z.object({
  draftOrderCreate: z.object({
    draftOrder: z.object({ id: z.string(), invoiceUrl: z.string().url(), reserveInventoryUntil: z.string().nullable() }).nullable(),
    userErrors,
  }),
});
const status = z.object({ node: z.object({ id: z.string().optional(), status: z.string().optional() }).nullable() });
const deleted = z.object({ draftOrderDelete: z.object({ deletedId: z.string().nullable(), userErrors }) });

/** The alert's id on the draft order and, once checked out, on the order (`note_attributes`). */
export const ALERT_ATTRIBUTE = 'restock_alert';

export function shopifyHolds(admin: AdminApi): UnitHolds {
  const token = async (shop: string) => {
    const current = await admin.tokens.current(shop);
    if (!current) throw new UpstreamError(`Holding a unit: no Admin API token for ${shop}`);
    return current;
  };
  return {
    async holdUnit(request: HoldRequest): Promise<UnitHold> {
      // A draft order's line is a variant; an alert about a whole product names none to hold.
      if (!request.variantId) throw new UpstreamError('Holding a unit: the alert names no variant');
      const input = {
        email: request.email,
        lineItems: [{ variantId: request.variantId, quantity: 1 }],
        reserveInventoryUntil: request.until.toISOString(),
        customAttributes: [{ key: ALERT_ATTRIBUTE, value: request.alertId }],
        tags: ['restock-hold'],
      };
      const shop = request.storeDomain;
      const data = await admin.query(shop, await token(shop), 'Holding a unit', DRAFT_ORDER_CREATE, { input }, created);
      const draft = data.draftOrderCreate.draftOrder;
      const refused = data.draftOrderCreate.userErrors[0];
      if (!draft || refused) throw new UpstreamError(`Holding a unit: Shopify refused the draft order: ${refused?.message ?? 'no draft order'}`);
      return { holdRef: draft.id, checkoutUrl: draft.invoiceUrl, until: draft.reserveInventoryUntil ?? request.until.toISOString() };
    },

    async releaseHold(shop: string, holdRef: string) {
      const accessToken = await token(shop);
      // A completed draft order is the shopper's order: nothing to release.
      const current = await admin.query(shop, accessToken, 'Reading a held unit', DRAFT_ORDER_STATUS, { id: holdRef }, status);
      if (current.node?.status === 'COMPLETED') return 'claimed';
      // Deleted already (by the merchant): the unit is back on sale all the same.
      if (!current.node?.id) return 'released';
      const data = await admin.query(shop, accessToken, 'Releasing a held unit', DRAFT_ORDER_DELETE, { input: { id: holdRef } }, deleted);
      const refused = data.draftOrderDelete.userErrors[0];
      if (refused) throw new UpstreamError(`Releasing a held unit: Shopify refused: ${refused.message}`);
      return 'released';
    },
  };
}
