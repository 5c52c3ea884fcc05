import { createHmac, randomUUID } from 'node:crypto';

/**
 * The headers of a Standard Webhooks delivery (https://www.standardwebhooks.com): an id, the
 * time in seconds, and `v1,` with the HMAC-SHA256 of `id.timestamp.body` under the secret's key.
 * Restock refuses a delivery whose signature or time (five minutes either way) does not hold.
 */
export function signedHeaders(key: Buffer, body: string, id: string = `msg_${randomUUID()}`, now: Date = new Date()): Record<string, string> {
  const timestamp = Math.floor(now.getTime() / 1000).toString();
  const signature = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': `v1,${signature}` };
}
