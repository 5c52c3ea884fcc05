import type { Kysely } from 'kysely';
import type { Dialect } from '../dialect.ts';
import { foundation } from './0001_foundation.ts';
import { identity } from './0002_identity.ts';
import { dispatch } from './0003_dispatch.ts';
import { payments } from './0004_payments.ts';
import { billing } from './0005_billing.ts';
import { storefrontDashboard } from './0006_storefront_dashboard.ts';
import { heldByPlan } from './0007_held_by_plan.ts';
import { addressKeys } from './0008_address_keys.ts';
import { planAcceptance } from './0009_plan_acceptance.ts';
import { expiringTokens } from './0010_expiring_tokens.ts';
import { sellableWhere } from './0011_sellable_where.ts';
import { conversions } from './0012_conversions.ts';
import { outgoingWebhooks } from './0013_outgoing_webhooks.ts';
import { notices } from './0014_notices.ts';
import { channels } from './0015_channels.ts';
import { channelFigures } from './0016_channel_figures.ts';
import { storeScale } from './0017_store_scale.ts';
import { ledgerFigures } from './0018_ledger_figures.ts';
import { orderFigures } from './0019_order_figures.ts';
import { storePlatforms } from './0020_store_platforms.ts';
import { storeConnections } from './0021_store_connections.ts';
import { contactPointsPerAddress } from './0022_contact_points_per_address.ts';
import { cancelledSubscriptions } from './0023_cancelled_subscriptions.ts';
import { shopifyConnections } from './0024_shopify_connections.ts';
import { contactPointDetails } from './0025_contact_point_details.ts';
import { overage } from './0028_overage.ts';
import { purchasing } from './0026_purchasing.ts';
import { agentCallbacks } from './0027_agent_callbacks.ts';
import { unitHolds } from './0030_unit_holds.ts';
import { klaviyo } from './0031_klaviyo.ts';
import { overageReporting } from './0032_overage_reporting.ts';
import { subscriptionsByAgent } from './0033_subscriptions_by_agent.ts';
import { subscriptionCountsPerStatement } from './0034_subscription_counts_per_statement.ts';

export interface DialectMigration {
  up(db: Kysely<any>, dialect: Dialect): Promise<void>;
}

/** The one migration set for both databases, applied in key order. Never edit a shipped entry. */
export const migrations: Record<string, DialectMigration> = {
  '0001_foundation': foundation,
  '0002_identity': identity,
  '0003_dispatch': dispatch,
  '0004_payments': payments,
  '0005_billing': billing,
  '0006_storefront_dashboard': storefrontDashboard,
  '0007_held_by_plan': heldByPlan,
  '0008_address_keys': addressKeys,
  '0009_plan_acceptance': planAcceptance,
  '0010_expiring_tokens': expiringTokens,
  '0011_sellable_where': sellableWhere,
  '0012_conversions': conversions,
  '0013_outgoing_webhooks': outgoingWebhooks,
  '0014_notices': notices,
  '0015_channels': channels,
  '0016_channel_figures': channelFigures,
  '0017_store_scale': storeScale,
  '0018_ledger_figures': ledgerFigures,
  '0019_order_figures': orderFigures,
  '0020_store_platforms': storePlatforms,
  '0021_store_connections': storeConnections,
  '0022_contact_points_per_address': contactPointsPerAddress,
  '0023_cancelled_subscriptions': cancelledSubscriptions,
  '0024_shopify_connections': shopifyConnections,
  '0025_contact_point_details': contactPointDetails,
  '0026_purchasing': purchasing,
  '0027_agent_callbacks': agentCallbacks,
  '0028_overage': overage,
  '0030_unit_holds': unitHolds,
  '0031_klaviyo': klaviyo,
  '0032_overage_reporting': overageReporting,
  '0033_subscriptions_by_agent': subscriptionsByAgent,
  '0034_subscription_counts_per_statement': subscriptionCountsPerStatement,
};
