import { Problem } from '../core/problems.ts';

/**
 * Failures of the OAuth and registration steps, named after their RFC 6749 / 6750 / auth.md
 * error codes. Each is a Problem (so the API answers problem+json with the code in `error`);
 * the token and revocation endpoints answer the same errors in RFC 6749's JSON shape.
 */
export class OAuthProblem extends Problem {
  readonly error: string;
  constructor(slug: ConstructorParameters<typeof Problem>[0], error: string, detail: string) {
    super(slug, detail, { extensions: { error } });
    this.error = error;
  }
}

/** RFC 6750: the token is missing a piece, expired, revoked, malformed or not ours. */
export class InvalidToken extends OAuthProblem {
  constructor(detail: string) {
    super('invalid-token', 'invalid_token', detail);
  }
}

/** RFC 6750: the token is fine but lacks `scope`. */
export class InsufficientScope extends OAuthProblem {
  readonly scope: string;
  constructor(scope: string) {
    super('insufficient-scope', 'insufficient_scope', `This operation needs the scope ${scope}.`);
    this.scope = scope;
    this.extensions.scope = scope;
  }
}

/** RFC 6750 / 6749: the request itself is malformed (a broken Authorization header, say). */
export class InvalidRequest extends OAuthProblem {
  constructor(detail: string) {
    super('malformed-request', 'invalid_request', detail);
  }
}

/**
 * The identity assertion was refused. `error` is the auth.md code: invalid_signature,
 * audience_mismatch, issuer_not_enabled, replay_detected, expired or invalid_assertion; at the
 * token endpoint every one of them is RFC 6749's invalid_grant.
 */
export class InvalidGrant extends OAuthProblem {
  constructor(error: string, detail: string) {
    super('invalid-assertion', error, detail);
  }
}

/** The claim could not proceed: claim_expired, otp_invalid, otp_attempts_exceeded, invalid_claim_token. */
export class ClaimFailed extends OAuthProblem {
  constructor(error: string, detail: string) {
    super('claim-failed', error, detail);
  }
}
