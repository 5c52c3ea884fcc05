/** What a merchant gives `RestockPlugin.init`, as Restock's dashboard shows it after connecting. */
export interface RestockPluginOptions {
  /** Restock's address, e.g. `https://restock.example.com`. */
  restockUrl: string;
  /** The store's domain in Restock, e.g. `shop.example.com`. */
  store: string;
  /** The signing secret Restock showed when the store was connected (`whsec_…`). */
  signingSecret: string;
  /** How long one delivery may take before it is tried again; default 10 000 ms. */
  timeoutMs?: number;
}

/** The options as the plugin uses them: checked once, at start, so that a typo fails the server's start and not a restock. */
export interface CheckedOptions {
  deliveryUrl: URL;
  store: string;
  key: Buffer;
  timeoutMs: number;
}

const STORE_DOMAIN = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;

export function checkOptions(options: RestockPluginOptions): CheckedOptions {
  const problems: string[] = [];
  let restock: URL | undefined;
  try {
    restock = new URL(String(options.restockUrl));
    if (restock.protocol !== 'https:' && restock.protocol !== 'http:') problems.push('restockUrl must be an http(s) address');
  } catch {
    problems.push('restockUrl must be an address such as https://restock.example.com');
  }
  const store = String(options.store ?? '').toLowerCase();
  if (!STORE_DOMAIN.test(store)) problems.push('store must be the store’s domain in Restock, such as shop.example.com');
  const secret = String(options.signingSecret ?? '');
  const key = /^whsec_[A-Za-z0-9+/]{32,}={0,2}$/.test(secret) ? Buffer.from(secret.slice('whsec_'.length), 'base64') : undefined;
  if (key === undefined || key.length < 24) problems.push('signingSecret must be the whsec_… secret Restock showed when the store was connected');
  const timeoutMs = options.timeoutMs ?? 10_000;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 100 || timeoutMs > 120_000) problems.push('timeoutMs must be a whole number of milliseconds from 100 to 120000');
  if (problems.length > 0 || restock === undefined || key === undefined) throw new Error(`RestockPlugin: ${problems.join('; ')}`);
  const deliveryUrl = new URL(`webhooks/vendure/${store}`, restock.href.endsWith('/') ? restock.href : `${restock.href}/`);
  return { deliveryUrl, store, key, timeoutMs };
}
