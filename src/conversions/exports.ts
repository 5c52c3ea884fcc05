import type { Readable } from 'node:stream';
import type { SubscriptionRow } from '../alerts/service.ts';
import type { Caller } from '../core/http/caller.ts';
import { csvStream, type CsvColumn } from '../core/csv.ts';
import type { NotificationRow } from '../dispatch/service.ts';
import type { AttributionRow } from './repository.ts';
import type { exportKinds } from './schemas.ts';

export type ExportKind = (typeof exportKinds)[number];

/** The row sources of the exports, each deciding tenancy when called (before anything streams). */
export interface ExportSources {
  subscriberRows(caller: Caller, domain: string): AsyncIterable<SubscriptionRow>;
  ledgerRows(caller: Caller, domain: string): AsyncIterable<NotificationRow>;
  attributedOrderRows(caller: Caller, domain: string): AsyncIterable<AttributionRow>;
}

const SUBSCRIBER_COLUMNS: CsvColumn<SubscriptionRow>[] = [
  { header: 'subscription_id', value: (row) => row.id },
  { header: 'created_at', value: (row) => row.created_at },
  { header: 'email', value: (row) => row.email },
  { header: 'product_id', value: (row) => row.product_id },
  { header: 'variant_id', value: (row) => row.variant_id },
  { header: 'status', value: (row) => row.status },
  { header: 'country', value: (row) => row.country },
  { header: 'locale', value: (row) => row.locale },
  { header: 'made_by', value: (row) => (row.agent_id === null ? 'storefront' : row.agent_id) },
  { header: 'updated_at', value: (row) => row.updated_at },
];

const ALERT_COLUMNS: CsvColumn<NotificationRow>[] = [
  { header: 'alert_id', value: (row) => row.id },
  { header: 'kind', value: (row) => row.kind },
  { header: 'channel', value: (row) => row.channel },
  { header: 'created_at', value: (row) => row.created_at },
  { header: 'sent_at', value: (row) => row.sent_at },
  { header: 'status', value: (row) => row.status },
  { header: 'email', value: (row) => row.email },
  { header: 'product_id', value: (row) => row.product_id },
  { header: 'variant_id', value: (row) => row.variant_id },
  { header: 'restock_id', value: (row) => row.restock_id },
  { header: 'subscription_id', value: (row) => row.subscription_id },
  { header: 'reason', value: (row) => row.reason },
  { header: 'outcome', value: (row) => row.outcome },
];

const ORDER_COLUMNS: CsvColumn<AttributionRow>[] = [
  { header: 'order_id', value: (row) => row.order_id },
  { header: 'placed_at', value: (row) => row.placed_at },
  { header: 'line_id', value: (row) => row.line_id },
  { header: 'product_id', value: (row) => row.product_id },
  { header: 'variant_id', value: (row) => row.variant_id },
  { header: 'alert_id', value: (row) => row.notification_id },
  { header: 'channel', value: (row) => row.channel },
  { header: 'attribution', value: (row) => row.kind },
  { header: 'amount_minor', value: (row) => Number(row.amount_minor) },
  { header: 'currency', value: (row) => row.currency },
  { header: 'shop_amount_minor', value: (row) => Number(row.shop_amount_minor) },
  { header: 'shop_currency', value: (row) => row.shop_currency },
  { header: 'net_minor', value: (row) => Number(row.net_minor) },
  { header: 'net_shop_minor', value: (row) => Number(row.net_shop_minor) },
];

/** One export as a CSV byte stream; throws (not found) before streaming when the caller may not read the store. */
export function exportCsv(sources: ExportSources, caller: Caller, domain: string, kind: ExportKind): Readable {
  switch (kind) {
    case 'subscribers':
      return csvStream(SUBSCRIBER_COLUMNS, sources.subscriberRows(caller, domain));
    case 'alerts':
      return csvStream(ALERT_COLUMNS, sources.ledgerRows(caller, domain));
    case 'orders':
      return csvStream(ORDER_COLUMNS, sources.attributedOrderRows(caller, domain));
  }
}
