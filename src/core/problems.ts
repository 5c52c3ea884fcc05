/**
 * RFC 9457 problem details. Every failure the service answers with is one of these types; each
 * type's URI is `{base_url}/problems/<slug>` and is served as a short explanation.
 */
export const problemTypes = {
  'validation-failed': {
    status: 400,
    title: 'The request is not valid',
    description: 'One or more fields are missing or malformed. `errors` lists each one with a JSON pointer.',
  },
  'malformed-request': {
    status: 400,
    title: 'The request could not be read',
    description: 'The body is not well-formed JSON, or a header is malformed.',
  },
  'forbidden-webhook-destination': {
    status: 400,
    title: 'The webhook URL is not one the service delivers to',
    description:
      'A webhook endpoint must be an http:// or https:// URL without credentials in it, on a host of the internet: loopback, private, link-local (cloud metadata) and other internal addresses, and names that only mean an internal host, are refused. `errors` points at the field. Nothing was stored.',
  },
  unauthorized: {
    status: 401,
    title: 'Authentication required',
    description:
      'This operation needs an access token (`Authorization: Bearer ...`). `WWW-Authenticate` points to the protected resource metadata that says how to get one; register at /api/agent/register.',
  },
  'invalid-token': {
    status: 401,
    title: 'The access token is not valid',
    description: 'The token is malformed, expired, revoked, not issued for this API, or bound to a client certificate that was not presented. Get a new one.',
  },
  'metrics-unauthorized': {
    status: 401,
    title: 'The metrics token is missing or wrong',
    description: 'GET /metrics on the service\'s port answers only a request carrying the operator\'s METRICS_TOKEN as `Authorization: Bearer ...`. Agent access tokens do not open it.',
  },
  'insufficient-scope': {
    status: 403,
    title: 'The access token lacks a scope this operation needs',
    description: '`scope` names the scope required. Register or claim an agent that holds it.',
  },
  forbidden: {
    status: 403,
    title: 'Not allowed',
    description: 'Your credential is valid but may not act on this resource, for example a store it is not bound to.',
  },
  'foreign-origin': {
    status: 403,
    title: 'Requests from other sites’ pages are not taken here',
    description:
      'A browser sent this request from a page of another site (its `Origin` is not this service’s). Only the API (`/api`, `/storefront`, Shopify’s app proxy) takes requests that change something from other sites’ pages; the MCP endpoint, the service’s own pages and their forms take them from its own origin, or from programs, which send no `Origin`. Nothing was done.',
  },
  'invalid-assertion': {
    status: 400,
    title: 'The identity assertion was refused',
    description: '`error` says why: invalid_signature, audience_mismatch, issuer_not_enabled, replay_detected, expired or invalid_request.',
  },
  'claim-failed': {
    status: 400,
    title: 'The claim could not be completed',
    description: '`error` says why: claim_expired, otp_invalid, otp_attempts_exceeded or invalid_claim_token.',
  },
  'not-found': {
    status: 404,
    title: 'Not found',
    description: 'No resource exists at this address, or it is not visible to you.',
  },
  'method-not-allowed': {
    status: 405,
    title: 'Method not allowed',
    description: 'The resource exists but does not accept this HTTP method. `Allow` lists those it does.',
  },
  'request-timeout': {
    status: 408,
    title: 'The request took too long to arrive',
    description: 'Its headers or its body did not arrive in the time the service allows (HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS). Nothing was done and the connection is closed; send the request again.',
  },
  'misdirected-request': {
    status: 421,
    title: 'This service does not answer for that host',
    description:
      'The `Host` names neither the host of the service’s published address nor one of its other names: the request was sent to the wrong server, or by a page whose name was pointed at this one (DNS rebinding). Nothing was done.',
  },
  conflict: {
    status: 409,
    title: 'Conflict with the current state',
    description: 'The resource is in a state that does not allow this operation.',
  },
  'idempotency-key-in-use': {
    status: 409,
    title: 'A request with this Idempotency-Key is still being processed',
    description: 'Wait for the first request to finish, then retry with the same key to receive its answer.',
  },
  'too-many-subscriptions': {
    status: 409,
    title: 'This agent holds as many waiting subscriptions for the store as it may',
    description:
      'An agent not bound to a store may hold a limited number of waiting subscriptions for it (`limit`): each alert they get is paid from the store’s allowance. Cancel some, wait until they are notified, or have the store’s owner claim the agent for the store.',
  },
  'too-many-contact-points': {
    status: 409,
    title: 'This alert already has as many phones or browsers as it may',
    description:
      'A subscription may gather a limited number of phones and of browsers (`limit` each). The e-mail subscription is kept as it was, and no phone or browser was added. The shopper can turn off ones they no longer use from the page linked in their alert e-mails.',
  },
  'shopify-billing-required': {
    status: 409,
    title: 'This store pays for its plan through Shopify Billing only',
    description:
      'The store installed Restock as a Shopify app, and Shopify requires such apps to charge merchants only through Shopify Billing. Nothing was charged. Call checkoutPlan with an access token: it answers Shopify’s confirmation page, where the merchant approves the charge in their Shopify admin.',
  },
  'idempotency-key-reused': {
    status: 422,
    title: 'This Idempotency-Key was used for a different request',
    description: 'An Idempotency-Key identifies one request. Use a new key for a request with a different method, path or body.',
  },
  'payload-too-large': {
    status: 413,
    title: 'The request body is too large',
    description: 'Request bodies are limited in size; the limit is given in `limitBytes`.',
  },
  'unsupported-media-type': {
    status: 415,
    title: 'Unsupported media type',
    description: 'The API accepts `application/json` bodies only (the pages people use also take HTML form posts).',
  },
  'invalid-webhook': {
    status: 401,
    title: 'The webhook signature is not valid',
    description:
      'The delivery is not signed with the shared secret (for Shopify: `X-Shopify-Hmac-Sha256` over the raw body; for WooCommerce: `X-WC-Webhook-Signature`, base64 of HMAC-SHA256 over the raw body with the secret the service gave the webhook; for BigCommerce: the secret header the service gave the webhook, its Standard Webhooks signature and its producer; for the BigCommerce app callbacks: `signed_payload_jwt`; for the Restock plugin for Vendure: its Standard Webhooks signature with the signing secret shown when the store was connected). Nothing was recorded.',
  },
  'invalid-proxy-signature': {
    status: 401,
    title: 'The app proxy signature is not valid',
    description:
      'The `/shopify/proxy` routes answer only requests forwarded by Shopify’s app proxy, which signs their query (`signature`, `timestamp`) with the app secret. The signature was missing or wrong, or more than 90 seconds old. Nothing was changed.',
  },
  'not-configured': {
    status: 501,
    title: 'This feature is not configured',
    description: 'The operator has not set the configuration this feature needs; `detail` names the setting.',
  },
  'upstream-failed': {
    status: 502,
    title: 'A platform the service depends on failed',
    description: "A call to the store's platform (such as Shopify's Admin API) failed. Nothing was changed; try again later.",
  },
  // Payment problems. Those named by the MPP specification keep its type URIs, so MPP clients
  // recognise them; each answers 402 with fresh offers unless said otherwise.
  'payment-required': {
    status: 402,
    title: 'Payment required',
    description:
      'This operation is paid per request when no access token is sent. The answer carries x402 requirements (`PAYMENT-REQUIRED`, and `accepts` in the body) and MPP challenges (`WWW-Authenticate: Payment`); pay one and retry, or register for an access token.',
    uri: 'https://paymentauth.org/problems/payment-required',
  },
  'payment-insufficient': {
    status: 402,
    title: 'The payment does not cover the price',
    description: 'The amount, asset or recipient of the payment does not match the offer. Pay one of the fresh offers.',
    uri: 'https://paymentauth.org/problems/payment-insufficient',
  },
  'payment-expired': {
    status: 402,
    title: 'The payment or its challenge has expired',
    description: 'Pay one of the fresh offers in this answer.',
    uri: 'https://paymentauth.org/problems/payment-expired',
  },
  'verification-failed': {
    status: 402,
    title: 'The payment could not be verified',
    description: 'The proof is invalid (signature, funds, already used, or refused by the payment network). Nothing was charged unless `paymentId` says so.',
    uri: 'https://paymentauth.org/problems/verification-failed',
  },
  'malformed-credential': {
    status: 402,
    title: 'The payment credential cannot be read',
    description: 'The `Authorization: Payment` credential or `PAYMENT-SIGNATURE` header is not well-formed.',
    uri: 'https://paymentauth.org/problems/malformed-credential',
  },
  'invalid-challenge': {
    status: 402,
    title: 'The challenge is not one of ours, was altered, is for another operation, or was already used',
    description: 'Each challenge pays for one request to the operation it was issued for. Pay one of the fresh offers in this answer.',
    uri: 'https://paymentauth.org/problems/invalid-challenge',
  },
  'method-unsupported': {
    status: 400,
    title: 'This payment method is not accepted here',
    description: 'Pay with one of the methods offered in the 402 answer.',
    uri: 'https://paymentauth.org/problems/method-unsupported',
  },
  'payment-method-unavailable': {
    status: 402,
    title: 'This payment method cannot take this payment',
    description:
      'The method is offered as the interface specifies but cannot complete this payment here: its settings are missing (`missing` names them), the amount is below what the network can charge (Stripe: USD 0.50), or it needs a processor the service does not have. Nothing was charged; pay another offer.',
  },
  'payment-network-unreachable': {
    status: 503,
    title: 'The payment network cannot be reached',
    description: 'The facilitator, processor or RPC that verifies or settles this payment did not answer. Nothing was served; retry after `Retry-After`.',
  },
  'settlement-failed': {
    status: 402,
    title: 'The payment could not be settled',
    description: 'The payment was verified but the network refused to settle it. The ledger keeps the attempt; pay again.',
  },
  'checkout-expired': {
    status: 410,
    title: 'The checkout session has expired',
    description: 'Create a new checkout session and complete it before it expires.',
  },
  'rate-limited': {
    status: 429,
    title: 'Too many requests',
    description: 'The rate limit for your credential or address is used up. `Retry-After` says when to try again; `RateLimit-*` headers describe the limit.',
  },
  'service-unavailable': {
    status: 503,
    title: 'The service is temporarily unavailable',
    description: 'A dependency such as the database cannot be reached. Nothing was changed; retry after the time in `Retry-After`.',
  },
  'internal-error': {
    status: 500,
    title: 'Internal error',
    description: 'Something failed on our side. Nothing was changed unless the response said otherwise; the request id helps us find it.',
  },
} as const satisfies Record<string, { status: number; title: string; description: string; uri?: string }>;

export type ProblemSlug = keyof typeof problemTypes;

export interface FieldError {
  /** RFC 6901 JSON pointer into the request, e.g. `/body/email` or `/headers/idempotency-key`. */
  pointer: string;
  message: string;
}

/** A failure that the error handler turns into a problem+json answer. */
export class Problem extends Error {
  readonly slug: ProblemSlug;
  readonly status: number;
  readonly title: string;
  readonly detail: string;
  readonly extensions: Record<string, unknown>;
  readonly headers: Record<string, string | string[]>;

  constructor(
    slug: ProblemSlug,
    detail: string,
    options: { extensions?: Record<string, unknown>; headers?: Record<string, string | string[]> } = {},
  ) {
    super(detail);
    this.name = 'Problem';
    this.slug = slug;
    this.status = problemTypes[slug].status;
    this.title = problemTypes[slug].title;
    this.detail = detail;
    this.extensions = options.extensions ?? {};
    this.headers = options.headers ?? {};
  }
}

export class ValidationFailed extends Problem {
  constructor(
    readonly errors: FieldError[],
    detail = describeFieldErrors(errors),
  ) {
    super('validation-failed', detail, { extensions: { errors } });
  }
}

export class NotFound extends Problem {
  constructor(detail: string) {
    super('not-found', detail);
  }
}

export class Conflict extends Problem {
  constructor(detail: string) {
    super('conflict', detail);
  }
}

export class Forbidden extends Problem {
  constructor(detail: string) {
    super('forbidden', detail);
  }
}

export class ServiceUnavailable extends Problem {
  constructor(detail: string, retryAfterSeconds = 5) {
    super('service-unavailable', detail, { headers: { 'retry-after': String(retryAfterSeconds) } });
  }
}

export class NotConfigured extends Problem {
  constructor(detail: string) {
    super('not-configured', detail);
  }
}

export function problemTypeUri(baseUrl: string, slug: ProblemSlug): string {
  const type = problemTypes[slug] as { uri?: string };
  return type.uri ?? `${baseUrl}/problems/${slug}`;
}

function describeFieldErrors(errors: FieldError[]): string {
  const parts = errors.slice(0, 5).map((e) => `${e.pointer}: ${e.message}`);
  if (errors.length > 5) parts.push(`and ${errors.length - 5} more`);
  return parts.join('; ');
}
