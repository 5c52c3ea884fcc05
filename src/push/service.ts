import type webpush from 'web-push';
import { postToTenant, type PostOutcome } from '../core/net/http-post.ts';
import type { OutboundPolicy } from '../core/net/outbound-guard.ts';
import { PushDeliveryError, type PushChannel, type PushMessage } from './channel.ts';
import type { PushConfig } from './settings.ts';
import { checkPushEndpoint, pushSubscriptionSchema } from './subscription.ts';
import type { VapidKeys } from './vapid.ts';
import { lazyPackage } from '../core/lazy-package.ts';

const webPush = lazyPackage<typeof webpush>('web-push');

export interface PushServiceOptions {
  keys: VapidKeys;
  config: PushConfig;
  /** Where a shopper's browser may make us connect (the operator's allow-list, else none). */
  policy: OutboundPolicy;
}

const VAPID_TOKEN_SECONDS = 12 * 3600;
/** Browsers use a handful of push services; a map this size never fills but for a flood of made-up origins. */
const VAPID_TOKENS_KEPT = 100;

/**
 * Web push (RFC 8030): the payload encrypted for the browser (RFC 8291, aes128gcm) and signed
 * for the push service with our VAPID key (RFC 8292), both by the `web-push` library; the request
 * itself goes through the guarded POST, because the endpoint is whatever the shopper's browser
 * named. What the push service answers decides whether dispatch retries, gives up, or forgets
 * the subscription.
 */
export class PushService implements PushChannel {
  /** Built once: a zod schema is compiled on first use, which cost more than the send itself when made per message. */
  private readonly subscriptionSchema: ReturnType<typeof pushSubscriptionSchema>;
  private readonly vapidTokens = new Map<string, { authorization: string; renewAt: number }>();

  constructor(private readonly options: PushServiceOptions) {
    this.subscriptionSchema = pushSubscriptionSchema(options.policy);
  }

  publicKey(): string {
    return this.options.keys.publicKey;
  }

  async send(message: PushMessage): Promise<void> {
    const endpoint = this.checkedEndpoint(message);
    const request = this.encryptedRequest(endpoint, message);
    const outcome = await postToTenant(endpoint.href, request.body, request.headers, {
      policy: this.options.policy,
      timeoutMs: this.options.config.timeoutMs,
      // A push service names the message's one address; a redirect elsewhere is not followed with the browser's payload.
      maxRedirects: 0,
    });
    settle(outcome);
  }

  /** The stored subscription, checked again as at storage: the policy may have tightened since. */
  private checkedEndpoint(message: PushMessage): URL {
    const parsed = this.subscriptionSchema.safeParse({ endpoint: message.endpoint, keys: message.keys });
    if (!parsed.success) {
      const reason = parsed.error.issues[0]?.message ?? 'is not a push subscription';
      throw new PushDeliveryError(`The push subscription cannot be used: ${reason}`, undefined, false, true);
    }
    const checked = checkPushEndpoint(parsed.data.endpoint, this.options.policy);
    if ('refused' in checked) throw new PushDeliveryError(`The push endpoint ${checked.refused}.`, undefined, false, true);
    return checked.url;
  }

  /**
   * The library's request for the WHATWG-normalised endpoint, so the VAPID audience it signs is
   * the origin we then connect to. Its headers are turned into strings; the length is the POST's.
   */
  /**
   * The VAPID `Authorization` for one push service (its origin is the JWT's audience), signed
   * once and reused until an hour before it expires: signing per message cost as much as
   * encrypting it. RFC 8292 allows a token for up to 24 hours; the library signs for 12.
   */
  private vapidAuthorization(audience: string): string {
    const now = Date.now();
    const cached = this.vapidTokens.get(audience);
    if (cached && cached.renewAt > now) return cached.authorization;
    const { subject, publicKey, privateKey } = { ...this.options.config, ...this.options.keys };
    const expires = Math.floor(now / 1000) + VAPID_TOKEN_SECONDS;
    const { Authorization: authorization } = webPush().getVapidHeaders(audience, subject, publicKey, privateKey, 'aes128gcm', expires);
    if (this.vapidTokens.size >= VAPID_TOKENS_KEPT) this.vapidTokens.clear();
    this.vapidTokens.set(audience, { authorization, renewAt: now + (VAPID_TOKEN_SECONDS - 3600) * 1000 });
    return authorization;
  }

  private encryptedRequest(endpoint: URL, message: PushMessage): { body: Buffer; headers: Record<string, string> } {
    let details: ReturnType<typeof webpush.generateRequestDetails>;
    try {
      details = webPush().generateRequestDetails({ endpoint: endpoint.href, keys: message.keys }, JSON.stringify(message.payload), {
        headers: { Authorization: this.vapidAuthorization(endpoint.origin) },
        TTL: message.ttlSeconds,
        contentEncoding: 'aes128gcm',
      });
    } catch {
      // Our words, not the library's: its messages may quote the key material.
      throw new PushDeliveryError('The push message could not be encrypted for this subscription (its keys are unusable).', undefined, false, true);
    }
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(details.headers)) {
      if (name.toLowerCase() !== 'content-length') headers[name.toLowerCase()] = String(value);
    }
    return { body: details.body ?? Buffer.alloc(0), headers };
  }
}

/**
 * What the push service's answer means for this message (RFC 8030 §5, §7.2 and §7.3; Mozilla
 * autopush's and Apple's documented statuses): success, the subscription gone, a refusal that
 * repeating cannot change, or something to try again later.
 */
function settle(outcome: PostOutcome): void {
  const status = outcome.statusCode;
  if (outcome.refused) throw new PushDeliveryError(`Not sent: ${outcome.error}.`, undefined, false, true);
  if (status === null) throw new PushDeliveryError(`The push service was not reached: ${outcome.error}.`, undefined, false, false);
  if (status >= 200 && status < 300) return;
  if (status === 404 || status === 410) {
    throw new PushDeliveryError(`The push service answered ${status}: the browser's subscription is gone.`, status, true, true);
  }
  throw new PushDeliveryError(`The push service answered ${status}.`, status, false, !isTransient(status));
}

/** Worth another try later: rate limited, timed out, or the push service's own trouble. */
function isTransient(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}
