import { ECDH } from 'node:crypto';
import net from 'node:net';
import { z } from 'zod';
import { checkNewDestination } from '../core/net/destination.ts';
import { STRICT_OUTBOUND, type OutboundPolicy } from '../core/net/outbound-guard.ts';

/**
 * A browser's push subscription, as `PushSubscription.toJSON()` gives it. The endpoint is the
 * shopper's browser's choice, so it is as untrusted as a tenant's webhook URL: the WHATWG parser
 * reads it, and it must be https (every browser's push service is) and name no internal host.
 * The operator's allow-list (TENANT_OUTBOUND_ALLOW) also admits plain http to an IP address it
 * lists, which is how a push service stand-in on loopback is reached in development and tests;
 * production, with no allow-list, only ever posts over https.
 */

export const PUSH_ENDPOINT_MAX_LENGTH = 1024;

/** RFC 4648 §5 without padding, as browsers encode the keys. */
const BASE64URL = /^[A-Za-z0-9_-]+$/;

export type PushEndpoint = { url: URL } | { refused: string };

/** Whether the service may post to this endpoint: the checks made when it is stored and again before every send. */
export function checkPushEndpoint(text: string, policy: OutboundPolicy): PushEndpoint {
  if (text.length > PUSH_ENDPOINT_MAX_LENGTH) return { refused: `is longer than ${PUSH_ENDPOINT_MAX_LENGTH} characters` };
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { refused: 'is not a URL' };
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && operatorAllowsPlainHttp(url, policy))) {
    return { refused: 'must be an https:// URL, as every browser’s push service is' };
  }
  if (url.hash !== '') return { refused: 'must not carry a #fragment' };
  const checked = checkNewDestination(url.href, policy);
  return 'refused' in checked ? checked : { url: checked.url };
}

/** Plain http only to an IP address the operator's allow-list names outright, never to a name. */
function operatorAllowsPlainHttp(url: URL, policy: OutboundPolicy): boolean {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const family = net.isIP(host);
  return family !== 0 && policy.allowed?.check(host, family === 4 ? 'ipv4' : 'ipv6') === true;
}

/** An uncompressed P-256 point: 0x04, then x and y, on the curve. */
function isP256Point(text: string): boolean {
  const bytes = Buffer.from(text, 'base64url');
  if (bytes.length !== 65 || bytes[0] !== 0x04) return false;
  try {
    ECDH.convertKey(bytes, 'prime256v1');
    return true;
  } catch {
    return false;
  }
}

/** The subscription's schema under the operator's outbound policy (strict unless given one). */
export function pushSubscriptionSchema(policy: OutboundPolicy = STRICT_OUTBOUND) {
  return z.object({
    endpoint: z
      .string()
      .min(1)
      .max(PUSH_ENDPOINT_MAX_LENGTH)
      .describe("The browser's push service URL (https)")
      .superRefine((text, ctx) => {
        const checked = checkPushEndpoint(text, policy);
        if ('refused' in checked) ctx.addIssue({ code: 'custom', message: `The push endpoint ${checked.refused}.` });
      }),
    /** Browsers send it, mostly null; not used (a gone subscription is learnt from the push service's 404/410). */
    expirationTime: z.number().int().nonnegative().nullable().optional(),
    keys: z.object({
      p256dh: z
        .string()
        .max(100)
        .regex(BASE64URL, 'base64url without padding')
        .refine(isP256Point, 'must be the browser’s P-256 public key: 65 bytes (uncompressed point), base64url'),
      auth: z
        .string()
        .max(40)
        .regex(BASE64URL, 'base64url without padding')
        .refine((text) => Buffer.from(text, 'base64url').length === 16, 'must be the 16-byte authentication secret, base64url'),
    }),
  });
}

export type PushSubscriptionJson = z.infer<ReturnType<typeof pushSubscriptionSchema>>;

/** Reads a subscription a browser handed over; the result says what is wrong, field by field. */
export function parsePushSubscription(json: unknown, policy: OutboundPolicy = STRICT_OUTBOUND) {
  return pushSubscriptionSchema(policy).safeParse(json);
}
