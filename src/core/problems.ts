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
    description: 'The delivery is not signed with the shared secret (for Shopify: `X-Shopify-Hmac-Sha256` over the raw body). Nothing was recorded.',
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
} as const satisfies Record<string, { status: number; title: string; description: string }>;

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
  readonly headers: Record<string, string>;

  constructor(
    slug: ProblemSlug,
    detail: string,
    options: { extensions?: Record<string, unknown>; headers?: Record<string, string> } = {},
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
  constructor(errors: FieldError[], detail = describeFieldErrors(errors)) {
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
  return `${baseUrl}/problems/${slug}`;
}

function describeFieldErrors(errors: FieldError[]): string {
  const parts = errors.slice(0, 5).map((e) => `${e.pointer}: ${e.message}`);
  if (errors.length > 5) parts.push(`and ${errors.length - 5} more`);
  return parts.join('; ');
}
