import { z } from 'zod';

export { parsePushSubscription, pushSubscriptionSchema, type PushSubscriptionJson } from './subscription.ts';

export const pushKeyResponse = z.object({
  publicKey: z.string().describe('The VAPID public key (RFC 8292), base64url: pass it to `pushManager.subscribe` as `applicationServerKey`'),
});
