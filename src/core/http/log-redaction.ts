/**
 * Some URLs are capabilities: whoever holds one can act (claim an agent, sign in to a store's
 * dashboard, unsubscribe a shopper, sign in from the Shopify admin, act as a store's owner on a
 * checkout). Logs keep the shape of the request and drop the secret, so reading the logs grants
 * nothing.
 */
const SECRET_QUERY = /([?&](?:claim_token|id_token|owner_key)=)[^&]*/g;
const SECRET_PATH = /^(\/(?:dashboard\/sign-in|unsubscribe)\/)[^/?]+/;

export function redactUrl(url: string): string {
  return url.replace(SECRET_PATH, '$1[redacted]').replace(SECRET_QUERY, '$1[redacted]');
}
