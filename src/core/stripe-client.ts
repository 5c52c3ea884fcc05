import type Stripe from 'stripe';

/**
 * The official Stripe SDK pointed at `apiUrl` (Stripe's API, or a stand-in in tests). One
 * instance serves both features that talk to Stripe: MPP payments and plan billing. The SDK is
 * loaded here, only when a key is set: it is two hundred modules that a deployment without
 * Stripe would otherwise load at every start.
 */
export async function stripeClient(secretKey: string, apiUrl: string, timeoutMs: number): Promise<Stripe> {
  const { default: StripeSdk } = await import('stripe');
  const url = new URL(apiUrl);
  return new StripeSdk(secretKey, {
    host: url.hostname,
    port: Number(url.port || (url.protocol === 'http:' ? 80 : 443)),
    protocol: url.protocol === 'http:' ? 'http' : 'https',
    // Every call we make carries an idempotency key, so a retry cannot charge twice.
    maxNetworkRetries: 1,
    timeout: timeoutMs,
  });
}
