// Longer than most files on purpose: the whole database at a glance, one interface per table.
import type { ChannelName } from '../channels.ts';
/**
 * The tables, as the migrations create them. Each table belongs to one feature (named beside it);
 * only that feature's store queries it.
 *
 * Timestamps are ISO-8601 UTC strings in both dialects: TEXT on SQLite, timestamptz on PostgreSQL
 * (read back as ISO strings, see dialect.ts), so one set of queries serves both.
 */
export interface Tables {
  /** alerts */
  subscriptions: SubscriptionsTable;
  /** alerts: kept by triggers on subscriptions (migration 0017) */
  subscription_counts: SubscriptionCountsTable;
  /** alerts: kept by triggers on subscriptions (migration 0017) */
  waitlists: WaitlistsTable;
  /** billing */
  checkout_sessions: CheckoutSessionsTable;
  /** billing */
  store_plans: StorePlansTable;
  /** billing */
  cancelled_subscriptions: CancelledSubscriptionsTable;
  /** billing */
  billing_events: BillingEventsTable;
  /** billing */
  plan_usage: PlanUsageTable;
  /** billing */
  overage_ceilings: OverageCeilingsTable;
  /** billing */
  overage_caps: OverageCapsTable;
  /** dashboard */
  dashboard_sign_in_links: DashboardSignInLinksTable;
  /** dashboard */
  dashboard_sessions: DashboardSessionsTable;
  /** core/http/idempotency */
  idempotency_keys: IdempotencyKeysTable;
  /** core/secrets */
  service_secrets: ServiceSecretsTable;
  /** stores */
  stores: StoresTable;
  /** agents */
  agents: AgentsTable;
  /** agents */
  agent_claim_attempts: AgentClaimAttemptsTable;
  /** agents */
  revoked_tokens: RevokedTokensTable;
  /** agents */
  used_assertions: UsedAssertionsTable;
  /** agents (signing keys) */
  signing_keys: SigningKeysTable;
  /** core/mail */
  mail_outbox: MailOutboxTable;
  /** inventory */
  inventory_variants: InventoryVariantsTable;
  /** inventory */
  inventory_levels: InventoryLevelsTable;
  inventory_unlisted_countries: InventoryUnlistedCountriesTable;
  /** shopify */
  shopify_webhook_events: ShopifyWebhookEventsTable;
  /** core/connectors: every platform's store connections */
  store_connections: StoreConnectionsTable;
  /** dispatch */
  restocks: RestocksTable;
  /** dispatch (the notification ledger, which is also the send queue) */
  notifications: NotificationsTable;
  /** dispatch: kept by triggers on notifications (migration 0018) */
  ledger_counts: LedgerCountsTable;
  /** dispatch: kept by triggers on notifications (migration 0018) */
  alerts_sent_daily: AlertsSentDailyTable;
  /** dispatch: kept by triggers on notifications (migration 0018) */
  alerts_sent_by_product: AlertsSentByProductTable;
  /** dispatch */
  suppressions: SuppressionsTable;
  /** payments */
  payments: PaymentsTable;
  /** klaviyo (migration 0031) */
  klaviyo_connections: KlaviyoConnectionsTable;
  /** klaviyo: the queue of events for Klaviyo's Events API (migration 0031) */
  klaviyo_events: KlaviyoEventsTable;
  /** shopify: the queue of Shopify Flow triggers (migration 0031) */
  flow_triggers: FlowTriggersTable;
  /** webhooks */
  webhook_endpoints: WebhookEndpointsTable;
  /** webhooks (the delivery queue, and what became of each) */
  webhook_deliveries: WebhookDeliveriesTable;
  /** webhooks (the delivery log) */
  webhook_attempts: WebhookAttemptsTable;
  /** webhooks: agents' callbacks and A2A pushes per subscription (migration 0027) */
  subscription_callbacks: SubscriptionCallbacksTable;
  /** webhooks: the alerts sent for subscriptions with callbacks, so their clicks and orders follow (migration 0027) */
  callback_alerts: CallbackAlertsTable;
  /** webhooks: each agent's Standard Webhooks secret for its callbacks (migration 0027) */
  agent_callback_secrets: AgentCallbackSecretsTable;
  /** conversions */
  alert_clicks: AlertClicksTable;
  /** conversions: kept by triggers on alert_clicks (migration 0018) */
  alert_clicks_daily: AlertClicksDailyTable;
  /** conversions: kept by triggers on alert_clicks (migration 0018) */
  alert_clicks_by_product: AlertClicksByProductTable;
  /** conversions: kept by triggers on order_attributions (migration 0019) */
  attributed_order_keys: AttributedOrderKeysTable;
  /** conversions: kept by triggers on order_attributions (migration 0019) */
  orders_daily: OrdersDailyTable;
  /** conversions: kept by triggers on order_attributions (migration 0019) */
  orders_by_channel_daily: OrdersByChannelDailyTable;
  /** conversions: kept by triggers on order_attributions (migration 0019) */
  orders_by_product_daily: OrdersByProductDailyTable;
  /** conversions */
  orders: OrdersTable;
  /** conversions */
  order_lines: OrderLinesTable;
  /** conversions */
  order_refunds: OrderRefundsTable;
  /** conversions */
  order_attributions: OrderAttributionsTable;
  /** notices */
  waitlist_crossings: WaitlistCrossingsTable;
  /** A subscription's phone (SMS) or browser (push), each with its own consent: the alerts feature. */
  contact_points: ContactPointsTable;
  /** Phones that texted STOP to one of the service's sender numbers: the SMS feature. */
  sms_opt_outs: SmsOptOutsTable;
  /** notices */
  notice_digests: NoticeDigestsTable;
  /** A unit held for an alert of a restock's first batch: dispatch (docs/dispatch.md, "Reserved units"). */
  unit_holds: UnitHoldsTable;
}

export type UnitHoldStatus = 'planned' | 'held' | 'failed' | 'released' | 'claimed';

export interface UnitHoldsTable {
  id: string;
  notification_id: string;
  restock_id: string;
  store_domain: string;
  subscription_id: string;
  product_id: string;
  variant_id: string | null;
  /** How long the unit is held, as the store's setting was when the batch was planned. */
  minutes: number;
  status: UnitHoldStatus;
  /** The platform's reference to the hold (a Shopify draft order's id). */
  hold_ref: string | null;
  /** Where the shopper checks out the held unit (a Shopify draft order's invoice URL). */
  checkout_url: string | null;
  expires_at: string | null;
  /** Why a hold failed or ended, for the merchant's audit. */
  outcome: string | null;
  created_at: string;
  updated_at: string;
}

/** The API's `subscriptionStatusSchema` values (alerts/schemas.ts): the alerts store writes those into this column, so the compiler keeps them together. */
export type SubscriptionStatus = 'pending' | 'active' | 'notified' | 'unsubscribed' | 'cancelled' | 'expired';
/** An expired session is `open` past its `expires_at`: expiry is computed, not stored. */
export type CheckoutSessionStatus = 'open' | 'completed' | 'awaiting_owner' | 'declined';
export type StorePlanStatus = 'pending' | 'active' | 'past_due' | 'cancelled';
export type IdempotencyKeyState = 'processing' | 'completed';
export type StoreStatus = 'active' | 'uninstalled';
export type AgentStatus = 'pending' | 'active' | 'revoked';
export type WebhookEventStatus = 'queued' | 'processing' | 'done' | 'failed';

export interface SubscriptionsTable {
  id: string;
  product_id: string;
  variant_id: string | null;
  email: string;
  status: SubscriptionStatus;
  store_domain: string | null;
  agent_id: string | null;
  created_at: string;
  updated_at: string;
  /** The language the shopper subscribed in (the storefront widget's); null: the store's. */
  locale: string | null;
  /**
   * `email` as compared (core/email.ts `addressKey`): NFC, lower-cased. Written with every row;
   * migration 0008 filled the older ones (the column is nullable only because SQLite cannot add a
   * NOT NULL column without a default).
   */
  email_key: string;
  /** 1: made by an agent not bound to the store (planned after the store's own shoppers, capped per agent); 0: the storefront or the store's own agents. */
  third_party: number;
  /** The shopper's country (ISO 3166-1 alpha-2) when the storefront knew it: alerted only where the product is on sale. */
  country: string | null;
  /** How the e-mail's consent was given: storefront-form, agent-api, ... ; null for rows made before consent was recorded. */
  consent_method: string | null;
  /** The words the shopper saw next to the button, as shown. */
  consent_text: string | null;
  /** The page the shopper subscribed on, when known. */
  consent_page: string | null;
  /** When a double opt-in was confirmed (status pending → active); null: single opt-in. */
  confirmed_at: string | null;
  /** 1: the shopper turned e-mail off for this subscription and keeps its other channels. */
  email_muted: number;
  /** When the double opt-in request went out (null: not yet, or not needed). */
  confirmation_sent_at: string | null;
}

/** A store's subscriptions in one status, counted as they change (never written by the service's code). */
export interface SubscriptionCountsTable {
  store_domain: string;
  status: SubscriptionStatus;
  n: number;
}

/** The shoppers waiting for one product of a store (`variant_key` '') or one variant; a row only while someone waits. */
export interface WaitlistsTable {
  store_domain: string;
  product_id: string;
  variant_key: string;
  waiting: number;
  /** The waiting subscriptions' `created_at` summed, in epoch seconds (migration 0026): time waited without a scan. */
  waiting_since_sum: number;
}

/** A store's alerts in one ledger status. */
export interface LedgerCountsTable {
  store_domain: string;
  status: string;
  n: number;
}

/** Alerts or reminders a store sent on one UTC day (YYYY-MM-DD) on one channel. */
export interface AlertsSentDailyTable {
  store_domain: string;
  day: string;
  channel: string;
  kind: string;
  n: number;
}

/** The same per product and variant (`variant_key` '' for the whole product). */
export interface AlertsSentByProductTable {
  store_domain: string;
  product_id: string;
  variant_key: string;
  day: string;
  kind: string;
  n: number;
}

/** Clicks on a store's alerts on one UTC day, per channel of the alert. */
export interface AlertClicksDailyTable {
  store_domain: string;
  day: string;
  channel: string;
  n: number;
}

/** The same per product and variant. */
export interface AlertClicksByProductTable {
  store_domain: string;
  product_id: string;
  variant_key: string;
  day: string;
  n: number;
}

/** How many lines of one attributed order fall under one key of one kept figure: the order counts there while any do. */
export interface AttributedOrderKeysTable {
  store_domain: string;
  order_id: string;
  figure: string;
  key: string;
  lines: number;
}

/** Attributed orders of one UTC day (YYYY-MM-DD of `placed_at`) in one pair of currencies. */
export interface OrdersDailyTable {
  store_domain: string;
  day: string;
  shop_currency: string;
  currency: string;
  orders: number;
  /** Orders with at least one line credited directly. */
  direct_orders: number;
  net_minor: number | string;
  net_shop_minor: number | string;
}

/** The same per channel of the credited alerts, in the store's currency. */
export interface OrdersByChannelDailyTable {
  store_domain: string;
  day: string;
  shop_currency: string;
  channel: string;
  orders: number;
  net_shop_minor: number | string;
}

/** The same per product and variant (`variant_key` '' for the whole product). */
export interface OrdersByProductDailyTable {
  store_domain: string;
  product_id: string;
  variant_key: string;
  day: string;
  shop_currency: string;
  orders: number;
  net_shop_minor: number | string;
}

/** pending: waiting for the shopper's YES; stopped: by the shopper; removed: the push service said it is gone; expired: never confirmed. */
export type ContactPointStatus = 'pending' | 'active' | 'stopped' | 'removed' | 'expired';

export interface ContactPointsTable {
  id: string;
  subscription_id: string;
  store_domain: string | null;
  channel: ChannelName;
  /** E.164 phone number, or the push service's endpoint URL. */
  address: string;
  /** What is compared: the E.164 number, or the SHA-256 of the endpoint. */
  address_key: string;
  /** JSON of what the channel keeps beyond the address (a browser's push keys), read through the channel's details schema. */
  details: string;
  status: ContactPointStatus;
  /** IANA time zone the shopper's browser gave (quiet hours are hers). */
  time_zone: string | null;
  consent_method: string;
  consent_text: string;
  consent_page: string | null;
  consent_at: string;
  confirmed_at: string | null;
  status_reason: string | null;
  /** When the SMS asking for the shopper's YES went out. */
  confirmation_sent_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface SmsOptOutsTable {
  /** The sender number (E.164) the phone wrote STOP to. */
  sender: string;
  phone: string;
  created_at: string;
}

export interface CheckoutSessionsTable {
  id: string;
  plan: string;
  shop: string;
  status: CheckoutSessionStatus;
  provider: string;
  amount_cents: number;
  currency: string;
  created_at: string;
  expires_at: string;
  completed_at: string | null;
  agent_id: string | null;
  /** The provider's own id: a Stripe Checkout Session, a Shopify AppSubscription. */
  external_id: string | null;
  /** The provider's page where the purchase is completed. */
  external_url: string | null;
  /** When the store's owner chose this purchase (null: a proposal not accepted, or a session older than 0009). */
  accepted_at: string | null;
  /** SHA-256 of the owner's one-time key for the hosted page; null once used, or when there is no owner to hold one. */
  owner_key_hash: string | null;
  /** The owner the key was made for: a key stops working when the store changes hands. */
  owner_email: string | null;
  /** When the owner was mailed this proposal (proposals mailed per store are limited). */
  proposal_mailed_at: string | null;
  /** When a proposal paid per request, declined or expired, was refunded (claimed before the refund, so it happens once). */
  refunded_at: string | null;
}

export interface StorePlansTable {
  shop: string;
  plan: string;
  /** No row: no plan. */
  status: StorePlanStatus;
  checkout_session_id: string | null;
  activated_at: string;
  updated_at: string;
  /** local | stripe | shopify | x402 | mpp */
  provider: string;
  /** The subscription at the provider (Stripe `sub_…`, Shopify AppSubscription gid). */
  external_id: string | null;
  period_start: string | null;
  period_end: string | null;
  /** When the provider said what the row says: older events are not applied over it. */
  event_at: string | null;
}

/**
 * Every subscription at a provider whose cancellation arrived (migration 0023): a cancellation is
 * final, and `store_plans` holds only the one subscription a store has now or had last.
 */
export interface CancelledSubscriptionsTable {
  provider: string;
  /** The subscription at the provider (Stripe `sub_…`, Shopify AppSubscription gid). */
  external_id: string;
  shop: string;
  /** When the provider cancelled it, by its own clock. */
  cancelled_at: string;
}

export interface BillingEventsTable {
  provider: string;
  event_id: string;
  type: string;
  shop: string | null;
  outcome: string;
  received_at: string;
}

export interface PlanUsageTable {
  shop: string;
  /** The billing period the count belongs to (ISO time of its start). */
  period_start: string;
  /** Alerts counted in the period, those beyond the allowance included. */
  used: number;
  /** When the merchant was told this period's alerts are held (told once per period). */
  notified_at: string | null;
  /** Of `used`, the alerts beyond the plan's allowance, billed per alert. */
  overage: number;
  /** When the merchant was warned that the period's room (allowance and ceiling) is running out. */
  warned_at: string | null;
  /** Of `overage`, how many the store's billing provider was told of (Stripe, Shopify). */
  overage_reported: number;
}

/** The most a store's owner agreed to pay a period for alerts beyond the allowance (no row: the plan's default). */
export interface OverageCeilingsTable {
  shop: string;
  ceiling_cents: number;
  updated_at: string;
}

/** The capped amount a provider holds for a subscription's usage charges (Shopify), in cents. */
export interface OverageCapsTable {
  shop: string;
  provider: string;
  external_id: string;
  cap_cents: number;
  updated_at: string;
}

export interface IdempotencyKeysTable {
  scope: string;
  key: string;
  fingerprint: string;
  state: IdempotencyKeyState;
  status_code: number | null;
  content_type: string | null;
  body: string | null;
  created_at: string;
  expires_at: string;
}

export interface ServiceSecretsTable {
  name: string;
  value: string;
  created_at: string;
}

export interface StoresTable {
  domain: string;
  owner_email: string;
  created_at: string;
  updated_at: string;
  /** `uninstalled`: the Shopify app was removed, nothing is sent. */
  status: StoreStatus;
  /** The platform the store runs on (shopify, woocommerce, ...); null only in rows older than migration 0020. */
  platform: string | null;
  /** When the store was last connected to its platform (the Shopify app installed, a connection made); null for a store the operator made. */
  installed_at: string | null;
  uninstalled_at: string | null;
  /** JSON of the store's settings (batch policy, templates, locale, sender); see stores/settings.ts. */
  settings: string;
  /** The store's own SMTP server URL (credentials included), sealed. */
  smtp_url_sealed: string | null;
  /** The store's own Twilio account and sender, sealed like `smtp_url_sealed`. */
  sms_sender_sealed: string | null;
}

export interface AgentsTable {
  id: string;
  /** anonymous | id_jag | verified_email */
  method: string;
  /** `pending`: the verified e-mail is not yet confirmed. */
  status: AgentStatus;
  /** bearer_token | mtls */
  credential_type: string;
  /** Space-separated scopes the agent holds now. */
  scopes: string;
  /** Space-separated scopes a claim grants. */
  post_claim_scopes: string;
  /** The confirmed (claimed or asserted) e-mail of the person answerable for the agent. */
  email: string | null;
  issuer: string | null;
  subject: string | null;
  store_domain: string | null;
  /** RFC 8705 x5t#S256 of the client certificate mtls credentials are bound to. */
  cert_thumbprint: string | null;
  claim_token_hash: string | null;
  claim_expires_at: string | null;
  /** Codes e-mailed for this claim token; capped so a claim URL cannot flood an inbox. */
  claim_codes_sent: number;
  created_at: string;
  claimed_at: string | null;
  revoked_at: string | null;
}

export interface AgentClaimAttemptsTable {
  id: string;
  agent_id: string;
  email: string;
  store_domain: string | null;
  otp_hash: string;
  failed_attempts: number;
  /** initiated | claimed | failed */
  status: string;
  created_at: string;
  expires_at: string;
}

export interface RevokedTokensTable {
  jti: string;
  agent_id: string;
  revoked_at: string;
  expires_at: string;
}

export interface UsedAssertionsTable {
  issuer: string;
  jti: string;
  expires_at: string;
}

export interface SigningKeysTable {
  kid: string;
  private_jwk: string;
  public_jwk: string;
  created_at: string;
  /** Set when a newer key took over signing; the key stays published until its tokens expire. */
  retired_at: string | null;
}

export interface MailOutboxTable {
  id: string;
  recipient: string;
  subject: string;
  text_body: string;
  html_body: string | null;
  /** JSON object of extra headers. */
  headers: string;
  /** What the mail is for, e.g. agent-claim-code. */
  purpose: string;
  created_at: string;
  /** The store the mail was sent for, when it was sent for one. */
  store_domain: string | null;
}

export interface InventoryVariantsTable {
  store_domain: string;
  product_id: string;
  /** '' stands for the product as a whole (a platform that reports stock per product). */
  variant_id: string;
  inventory_item_id: string | null;
  /** Sellable quantity across locations; null while unknown. */
  available: number | null;
  /** 1 when the product is published (sellable), 0 otherwise. */
  published: number;
  /** 1 when the variant is sold whatever its stock (backorders, untracked, pre-order): never sold out. */
  purchasable_without_stock: number;
  product_title: string | null;
  variant_title: string | null;
  image_url: string | null;
  product_url: string | null;
  /** The current price in the currency's minor unit (migration 0026); null while unknown. */
  price_minor: number | null;
  /** ISO 4217 code of `price_minor`; null exactly when it is. */
  price_currency: string | null;
  /** The source's own time of the last report taken; older reports are stale. */
  source_updated_at: string | null;
  updated_at: string;
}

export interface InventoryLevelsTable {
  store_domain: string;
  inventory_item_id: string;
  location_id: string;
  available: number | null;
  source_updated_at: string | null;
  updated_at: string;
}

/** A store's connection to its platform: WooCommerce, BigCommerce (src/core/connectors). */
export interface StoreConnectionsTable {
  store_domain: string;
  platform: string;
  /** Where the store lives on its platform: a WooCommerce site's address (where /wp-json/wc/v3 is), a BigCommerce store's hash, a Shopify store's myshopify.com domain. */
  site: string;
  status: 'connected' | 'disconnected';
  /**
   * What the platform's API takes, sealed with RESTOCK_ENCRYPTION_KEY; null once disconnected.
   * WooCommerce's consumer key and secret and BigCommerce's access token as JSON; Shopify's
   * offline Admin API token as it is.
   */
  credentials_sealed: string | null;
  /** When the credentials stop working; null for credentials that never expire. */
  credentials_expire_at: string | null;
  /** What trades for new credentials when they expire (an OAuth refresh token), sealed; the platform may replace it at every refresh. */
  refresh_credentials_sealed: string | null;
  refresh_credentials_expire_at: string | null;
  /** Held by the process refreshing the credentials, so that no other refreshes at the same time. */
  refresh_lease_until: string | null;
  /** The platform refused to refresh the credentials: nothing is asked of it until the owner grants access again. */
  reauthorization_required_at: string | null;
  /** What the platform granted the credentials, as it lists them (Shopify's access scopes). */
  scopes: string | null;
  /** The secret the platform's webhooks prove themselves with, sealed; null where they prove themselves with the app's own secret (Shopify). */
  webhook_secret_sealed: string | null;
  /** JSON array of the ids of the webhooks created on the platform. */
  webhook_ids: string;
  connected_at: string;
  disconnected_at: string | null;
  /** Why it ended: the owner disconnected or uninstalled, or the platform refused the credentials. */
  disconnect_reason: string | null;
  reconciled_at: string | null;
  updated_at: string;
}

export interface ShopifyWebhookEventsTable {
  /** X-Shopify-Event-Id: shared by every delivery of one event. */
  event_id: string;
  store_domain: string;
  topic: string;
  webhook_id: string | null;
  payload: string;
  triggered_at: string | null;
  status: WebhookEventStatus;
  attempts: number;
  lease_until: string | null;
  error: string | null;
  received_at: string;
  processed_at: string | null;
}

export interface RestocksTable {
  id: string;
  store_domain: string;
  product_id: string;
  /** null: the product as a whole came back (every subscription to the product matches). */
  variant_id: string | null;
  /** Sellable quantity when the restock was detected. */
  available: number;
  /** shopify-webhook | woocommerce-webhook | bigcommerce-webhook | inventory-api | reconciliation */
  source: string;
  source_ref: string | null;
  /** 1 when the source proved the product is the store's (Shopify), so subscriptions made without a store match too. */
  include_unowned: number;
  /** dispatching | done | sold_out | unpublished | stopped */
  status: string;
  batches: number;
  planned: number;
  cursor_created_at: string | null;
  cursor_id: string | null;
  /** The same cursor over third-party subscribers, who are planned after the store's own. */
  third_party_cursor_created_at: string | null;
  third_party_cursor_id: string | null;
  next_batch_at: string;
  lease_owner: string | null;
  lease_until: string | null;
  stop_reason: string | null;
  detected_at: string;
  updated_at: string;
}

export interface NotificationsTable {
  id: string;
  restock_id: string;
  subscription_id: string;
  store_domain: string;
  email: string;
  product_id: string;
  variant_id: string | null;
  batch: number;
  position: number;
  /** queued | sending | sent | skipped | failed */
  status: string;
  /** Why the alert was (to be) sent, in words a merchant can read. */
  reason: string;
  /** What happened: the SMTP answer, or why it was skipped or failed. */
  outcome: string | null;
  attempts: number;
  next_attempt_at: string;
  lease_owner: string | null;
  lease_until: string | null;
  created_at: string;
  sent_at: string | null;
  /** The subscriber's language, from their subscription; null: the store's. */
  locale: string | null;
  /**
   * 1 when the outcome last recorded is a hold by the store's plan (allowance used up, or the
   * plan needs the store's own SMTP server), else 0; written with that outcome. Queued rows with
   * it are the queue's "held by the plan".
   */
  held_by_plan: number;
  /** `email` as compared (`addressKey`): the per-restock dedupe and the frequency cap read the ledger by it. */
  email_key: string;
  /** 1 when the subscription is third-party: such alerts take the store's allowance only after its own shoppers'. */
  third_party: number;
  /** alert: the restock's message; reminder: the second message some stores send after it. */
  kind: NotificationKind;
  /** For a reminder, the alert it follows. */
  reminder_of: string | null;
  /** The channel this message goes by; `email` goes to `email`, the others to `contact_point_id`. */
  channel: ChannelName;
  contact_point_id: string | null;
  /** The provider's id of the message (Twilio's Message SID), to match its delivery reports. */
  provider_ref: string | null;
  /** The provider's last delivery report (delivered, undelivered, failed), after `sent`. */
  delivery_status: string | null;
}

export type NotificationKind = 'alert' | 'reminder';

export interface SuppressionsTable {
  store_domain: string;
  /** As it was reported (the domain lower-cased). */
  email: string;
  /** What suppression compares (`addressKey`); one row per store and key. */
  email_key: string;
  /** bounce | complaint | manual */
  reason: string;
  detail: string | null;
  created_at: string;
}

export interface PaymentsTable {
  id: string;
  /** What makes a proof single-use: `x402:<network>:<payer>:<nonce>` or `mpp:<challenge id>`. */
  proof_key: string;
  protocol: string;
  method: string;
  intent: string;
  operation: string;
  /** In base units of `currency`, as a decimal string. */
  amount: string;
  currency: string;
  payer: string | null;
  reference: string | null;
  status: string;
  error: string | null;
  request_method: string;
  request_path: string;
  request_id: string;
  store_domain: string | null;
  result_ref: string | null;
  /** What a reconciliation needs to finish a settlement whose outcome is unknown. */
  proof: string | null;
  attempts: number;
  created_at: string;
  updated_at: string;
}

export interface DashboardSignInLinksTable {
  /** SHA-256 of the link's secret, base64url. */
  token_hash: string;
  shop: string;
  created_at: string;
  expires_at: string;
  /** Set when the link is used: it signs in once. */
  used_at: string | null;
}

export interface DashboardSessionsTable {
  /** SHA-256 of the session cookie's secret, base64url. */
  id_hash: string;
  shop: string;
  /** How the owner signed in: `email` (one-time link) or `shopify` (session token in the admin). */
  via: string;
  created_at: string;
  expires_at: string;
  /** Set at sign-out. */
  ended_at: string | null;
}

/** A country where a product is not on sale (a market it is not published to). */
export interface InventoryUnlistedCountriesTable {
  store_domain: string;
  product_id: string;
  /** ISO 3166-1 alpha-2. */
  country: string;
  updated_at: string;
}

/** The first click on each alert's link (bots and prefetches not counted). */
export interface AlertClicksTable {
  notification_id: string;
  /** The channel the clicked alert went by. */
  channel: ChannelName;
  store_domain: string;
  product_id: string;
  variant_id: string | null;
  clicked_at: string;
}

/** An order by an alerted address, kept only as far as attribution needs. */
export interface OrdersTable {
  store_domain: string;
  order_id: string;
  email_key: string;
  placed_at: string;
  /** shopify | api */
  source: string;
  cancelled_at: string | null;
  recorded_at: string;
}

/** Amounts are integers of the currency's minor unit (bigint columns, read back as numbers). */
export interface OrderLinesTable {
  store_domain: string;
  order_id: string;
  line_id: string;
  product_id: string;
  variant_id: string | null;
  quantity: number;
  amount_minor: number;
  currency: string;
  shop_amount_minor: number;
  shop_currency: string;
}

export interface OrderRefundsTable {
  store_domain: string;
  order_id: string;
  refund_id: string;
  line_id: string;
  amount_minor: number;
  currency: string;
  shop_amount_minor: number;
  shop_currency: string;
  refunded_at: string;
}

/** One order line credited to one alert. */
export interface OrderAttributionsTable {
  store_domain: string;
  order_id: string;
  line_id: string;
  notification_id: string;
  /** The channel the credited alert went by. */
  channel: ChannelName;
  product_id: string;
  variant_id: string | null;
  /** direct (the alert's link was clicked first) | assisted */
  kind: 'direct' | 'assisted';
  placed_at: string;
  amount_minor: number;
  currency: string;
  shop_amount_minor: number;
  shop_currency: string;
  net_minor: number;
  net_shop_minor: number;
}

/** A waitlist (a product's, or one variant's) at or above its store's threshold: one crossing, told once. */
export interface WaitlistCrossingsTable {
  store_domain: string;
  product_id: string;
  /** The variant's id, or '' for the subscriptions to the whole product. */
  variant_key: string;
  crossed_at: string;
  /** Shoppers waiting when the crossing was found. */
  waiting: number;
  /** The store's threshold then. */
  threshold: number;
  /** When the owner was told; null until then. */
  noticed_at: string | null;
  /** A worker is telling the owner until then; past it, another may. */
  notice_lease_until: string | null;
}

/** Per store: the weekly digest's progress. */
export interface NoticeDigestsTable {
  store_domain: string;
  /** The end of the week the last digest covered; null before the first. */
  last_digest_at: string | null;
  /** A worker is sending the digest until then; past it, another may. */
  lease_until: string | null;
}

/** An endpoint a store registered for its events (Standard Webhooks). */
export interface WebhookEndpointsTable {
  id: string;
  store_domain: string;
  url: string;
  /** JSON array of the event types it takes. */
  event_types: string;
  enabled: number;
  /** Why it was disabled (by its owner, or after failing too long); null while enabled. */
  disabled_reason: string | null;
  disabled_at: string | null;
  /** The `whsec_` signing secret, sealed (core/sealed-secrets.ts). */
  secret_sealed: string;
  /** Failed attempts since the last success, across its deliveries. */
  consecutive_failures: number;
  /** The first failed attempt of the current run of failures; null after a success. */
  failing_since: string | null;
  created_at: string;
  updated_at: string;
  /** `store`: a store's endpoint; `callback`: an agent's callback URL; `a2a-push`: an A2A push notification config (migration 0027). */
  kind: WebhookEndpointKind;
  /** The agent an agent's endpoint belongs to; null for a store's. */
  agent_id: string | null;
}

export type WebhookEndpointKind = 'store' | 'callback' | 'a2a-push';

/** Which agent endpoint hears of which subscription. */
export interface SubscriptionCallbacksTable {
  subscription_id: string;
  endpoint_id: string;
  agent_id: string;
  kind: Exclude<WebhookEndpointKind, 'store'>;
  a2a_task_id: string | null;
  /** JSON: the A2A task the push updates. */
  a2a_task: string | null;
  created_at: string;
}

export interface CallbackAlertsTable {
  alert_id: string;
  subscription_id: string;
  created_at: string;
}

export interface AgentCallbackSecretsTable {
  agent_id: string;
  /** The agent's `whsec_` secret, sealed (core/sealed-secrets.ts). */
  secret_sealed: string;
  created_at: string;
}

export type WebhookDeliveryStatus = 'pending' | 'delivered' | 'failed' | 'cancelled';

/** One event for one endpoint: queued until delivered, given up, or cancelled with its endpoint. */
export interface WebhookDeliveriesTable {
  id: string;
  endpoint_id: string;
  store_domain: string;
  /** The event's id, sent as `webhook-id`: unique per endpoint. */
  event_id: string;
  event_type: string;
  /** The JSON body as signed and sent. */
  payload: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  /** Pending: when it is next due (a claim moves it to the end of its lease). */
  next_attempt_at: string | null;
  last_error: string | null;
  created_at: string;
  finished_at: string | null;
}

/** One HTTP attempt of a delivery. */
export interface WebhookAttemptsTable {
  delivery_id: string;
  attempt: number;
  endpoint_id: string;
  attempted_at: string;
  /** The final answer's status, after redirects; null when none came. */
  status_code: number | null;
  error: string | null;
  duration_ms: number;
}

/** A store's Klaviyo account: its private API key, sealed; forgotten when disconnected. */
export interface KlaviyoConnectionsTable {
  store_domain: string;
  status: 'connected' | 'disconnected';
  key_sealed: string | null;
  /** The key's last four characters, so the owner can tell which key is connected. */
  key_hint: string | null;
  /** The Klaviyo account the key belongs to, as GET /api/accounts answered. */
  account_id: string | null;
  connected_at: string;
  disconnected_at: string | null;
  disconnect_reason: string | null;
  updated_at: string;
}

export type KlaviyoEventStatus = 'pending' | 'delivered' | 'failed' | 'cancelled';

/** One store event as a Klaviyo event: queued until Klaviyo takes it, refuses it for good, or the store disconnects. */
export interface KlaviyoEventsTable {
  id: string;
  store_domain: string;
  /** The store event's id, also the Klaviyo `unique_id`. */
  event_id: string;
  event_type: string;
  /** For `alert.sent`: the alert and the profile it went to, which its click and order are put on. */
  alert_id: string | null;
  email: string | null;
  /** The JSON:API body as sent to POST /api/events. */
  body: string;
  status: KlaviyoEventStatus;
  attempts: number;
  next_attempt_at: string | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: string;
  finished_at: string | null;
}

/** One store event as a Shopify Flow trigger: queued until Shopify takes it, refuses it, or the store's token is gone. */
export interface FlowTriggersTable {
  id: string;
  store_domain: string;
  /** The store event's id: one trigger per event. */
  event_id: string;
  /** The Flow trigger extension's handle (extensions/<handle>/shopify.extension.toml). */
  handle: string;
  /** The JSON payload as sent to flowTriggerReceive. */
  payload: string;
  status: 'pending' | 'delivered' | 'failed' | 'cancelled';
  attempts: number;
  next_attempt_at: string | null;
  last_error: string | null;
  created_at: string;
  finished_at: string | null;
}
