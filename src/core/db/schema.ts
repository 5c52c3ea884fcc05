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
  /** billing */
  checkout_sessions: CheckoutSessionsTable;
  /** billing */
  store_plans: StorePlansTable;
  /** core/http/idempotency */
  idempotency_keys: IdempotencyKeysTable;
  /** core/secrets */
  service_secrets: ServiceSecretsTable;
}

export interface SubscriptionsTable {
  id: string;
  product_id: string;
  variant_id: string | null;
  email: string;
  status: string;
  created_at: string;
  updated_at: string;
}

export interface CheckoutSessionsTable {
  id: string;
  plan: string;
  shop: string;
  status: string;
  provider: string;
  amount_cents: number;
  currency: string;
  created_at: string;
  expires_at: string;
  completed_at: string | null;
}

export interface StorePlansTable {
  shop: string;
  plan: string;
  status: string;
  checkout_session_id: string | null;
  activated_at: string;
  updated_at: string;
}

export interface IdempotencyKeysTable {
  scope: string;
  key: string;
  fingerprint: string;
  state: string;
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
