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
}

export interface SubscriptionsTable {
  id: string;
  product_id: string;
  variant_id: string | null;
  email: string;
  status: string;
  store_domain: string | null;
  agent_id: string | null;
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
  agent_id: string | null;
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

export interface StoresTable {
  domain: string;
  owner_email: string;
  created_at: string;
  updated_at: string;
}

export interface AgentsTable {
  id: string;
  /** anonymous | id_jag | verified_email */
  method: string;
  /** pending (verified e-mail not yet confirmed) | active | revoked */
  status: string;
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
}
