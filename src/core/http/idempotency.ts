import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { isoAfter, nowIso } from '../clock.ts';
import type { Database } from '../db/database.ts';
import { isUniqueViolation } from '../db/dialect.ts';
import { Problem, ValidationFailed } from '../problems.ts';

/**
 * `Idempotency-Key` on POST and DELETE routes that opt in with `config: { idempotent: true }`
 * (install before those routes register).
 * The same key with the same request replays the stored answer (and says so in
 * `Idempotent-Replayed: true`); with a different request it is refused (422); while the first
 * request is still running, a second one gets 409. Only successful answers are kept: after a
 * refusal (4xx) or a failure (5xx) the key is free again and a retry runs afresh.
 */

declare module 'fastify' {
  interface FastifyContextConfig {
    idempotent?: boolean;
  }
  interface FastifyRequest {
    idempotencyClaim?: { scope: string; key: string };
  }
}

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
/** A claim older than this whose request never finished (a crashed process) may be taken over. */
const ABANDONED_AFTER_MS = 60_000;
const SWEEP_EVERY_MS = 10 * 60_000;

export interface IdempotencyOptions {
  database: Database;
  ttlHours: number;
  /** Who is asking; keys are private to a caller. Identity plugs in here. */
  callerOf?: (request: FastifyRequest) => string;
}

/**
 * Idempotency-Key on the routes that opt in. After the access-token check, since keys are
 * private to a caller.
 */
export function idempotencyGate(options: IdempotencyOptions) {
  return fp(async (app) => installIdempotency(app, options), { name: 'idempotency-gate', dependencies: ['identity-gate'], fastify: '5.x' });
}

function installIdempotency(app: FastifyInstance, options: IdempotencyOptions) {
  const store = new IdempotencyRepository(options.database, options.ttlHours);
  const callerOf = options.callerOf ?? (() => 'anyone');

  const claimKey = async (request: FastifyRequest, reply: FastifyReply) => {
    const key = readKey(request);
    if (key === undefined) return;
    const scope = `${callerOf(request)} ${request.method} ${request.url}`;
    const outcome = await store.claim(scope, key, fingerprint(request));
    if (outcome.kind === 'claimed') {
      request.idempotencyClaim = { scope, key };
      return;
    }
    if (outcome.kind === 'other-request') {
      throw new Problem('idempotency-key-reused', 'This Idempotency-Key was first used with a different request.');
    }
    if (outcome.kind === 'in-progress') {
      throw new Problem('idempotency-key-in-use', 'The first request with this Idempotency-Key has not finished.', {
        headers: { 'retry-after': '1' },
      });
    }
    return replay(reply, outcome.stored);
  };

  const settleKey = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const claim = request.idempotencyClaim;
    if (!claim) return payload;
    request.idempotencyClaim = undefined;
    // Only successes are kept: a refused request changes nothing, not even the key's record,
    // so its retry runs afresh.
    if (reply.statusCode >= 300) {
      await store.release(claim.scope, claim.key);
    } else {
      const contentType = String(reply.getHeader('content-type') ?? 'application/json');
      await store.complete(claim.scope, claim.key, reply.statusCode, contentType, String(payload ?? ''));
    }
    return payload;
  };

  // Only the routes that opt in carry the hooks; every other request pays nothing for them.
  app.addHook('onRoute', (route) => {
    if (!route.config?.idempotent) return;
    route.preHandler = [claimKey, ...[route.preHandler ?? []].flat()];
    route.onSend = [...[route.onSend ?? []].flat(), settleKey];
  });

  const sweeper = setInterval(() => void store.sweep().catch(() => {}), SWEEP_EVERY_MS);
  sweeper.unref();
  app.addHook('onClose', async () => clearInterval(sweeper));
}

function readKey(request: FastifyRequest): string | undefined {
  const raw = request.headers['idempotency-key'];
  if (raw === undefined) return undefined;
  // RFC 8941 sf-string form ("key") is what the IETF draft specifies; bare tokens are common too.
  const value = Array.isArray(raw) ? raw.join(',') : raw.trim().replace(/^"(.*)"$/, '$1');
  if (!KEY_PATTERN.test(value)) {
    throw new ValidationFailed([
      { pointer: '/headers/idempotency-key', message: 'must be 1 to 255 visible ASCII characters' },
    ]);
  }
  return value;
}

/**
 * Only a body the route validated takes part: it is then bounded in shape (unknown keys are
 * stripped), while a body a route ignores could be anything, nested thousands deep.
 */
function fingerprint(request: FastifyRequest): string {
  const body = request.routeOptions.schema?.body ? (request.body ?? null) : null;
  return createHash('sha256').update(canonicalJson(body)).digest('base64url');
}

/** JSON with object keys sorted, so the same body in another key order is the same request. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function replay(reply: FastifyReply, stored: StoredAnswer) {
  return reply
    .code(stored.statusCode)
    .header('content-type', stored.contentType)
    .header('idempotent-replayed', 'true')
    .serializer((body: unknown) => String(body))
    .send(stored.body);
}

interface StoredAnswer {
  statusCode: number;
  contentType: string;
  body: string;
}

type ClaimOutcome =
  | { kind: 'claimed' }
  | { kind: 'in-progress' }
  | { kind: 'other-request' }
  | { kind: 'replay'; stored: StoredAnswer };

class IdempotencyRepository {
  constructor(
    private readonly database: Database,
    private readonly ttlHours: number,
  ) {}

  /** Two first uses of a key can race on PostgreSQL; the loser reads the winner's row. */
  async claim(scope: string, key: string, fingerprint: string): Promise<ClaimOutcome> {
    try {
      return await this.tryClaim(scope, key, fingerprint);
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      return this.tryClaim(scope, key, fingerprint);
    }
  }

  private tryClaim(scope: string, key: string, fingerprint: string): Promise<ClaimOutcome> {
    return this.database.write(async (trx) => {
      const now = new Date();
      const existing = await trx
        .selectFrom('idempotency_keys')
        .selectAll()
        .where('scope', '=', scope)
        .where('key', '=', key)
        .executeTakeFirst();
      const reusable =
        existing &&
        (existing.expires_at <= now.toISOString() ||
          (existing.state === 'processing' &&
            existing.created_at <= new Date(now.getTime() - ABANDONED_AFTER_MS).toISOString()));
      if (existing && !reusable) {
        if (existing.fingerprint !== fingerprint) return { kind: 'other-request' };
        if (existing.state === 'processing') return { kind: 'in-progress' };
        return {
          kind: 'replay',
          stored: {
            statusCode: existing.status_code ?? 200,
            contentType: existing.content_type ?? 'application/json',
            body: existing.body ?? '',
          },
        };
      }
      if (existing) {
        await trx.deleteFrom('idempotency_keys').where('scope', '=', scope).where('key', '=', key).execute();
      }
      await trx
        .insertInto('idempotency_keys')
        .values({
          scope,
          key,
          fingerprint,
          state: 'processing',
          status_code: null,
          content_type: null,
          body: null,
          created_at: now.toISOString(),
          expires_at: isoAfter(this.ttlHours * 3_600_000, now),
        })
        .execute();
      return { kind: 'claimed' };
    });
  }

  complete(scope: string, key: string, statusCode: number, contentType: string, body: string): Promise<unknown> {
    return this.database.write((trx) =>
      trx
        .updateTable('idempotency_keys')
        .set({ state: 'completed', status_code: statusCode, content_type: contentType, body })
        .where('scope', '=', scope)
        .where('key', '=', key)
        .execute(),
    );
  }

  release(scope: string, key: string): Promise<unknown> {
    return this.database.write((trx) =>
      trx.deleteFrom('idempotency_keys').where('scope', '=', scope).where('key', '=', key).execute(),
    );
  }

  sweep(): Promise<unknown> {
    return this.database.write((trx) =>
      trx.deleteFrom('idempotency_keys').where('expires_at', '<=', nowIso()).execute(),
    );
  }
}
