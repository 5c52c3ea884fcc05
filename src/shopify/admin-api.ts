import { z } from 'zod';
import type { AccessTokens } from './access-tokens.ts';
import { callShopify, isUnauthorized, offlineSession, UpstreamError, type ShopifyApi } from './shopify-api.ts';

const SHOP_EMAIL = `query RestockShopEmail { shop { email } }`;

/**
 * The Admin GraphQL operations the app needs, through the library's client with a store's
 * offline token. Answers are checked against the fields asked for before anyone reads them.
 */
export class AdminApi {
  constructor(
    private readonly shopify: ShopifyApi,
    /** Where callers get the token to pass, and where a rejected one is replaced. */
    readonly tokens: AccessTokens,
  ) {}

  /** The address Shopify has for the store: its owner's, for install and data requests. */
  async shopEmail(shop: string, accessToken: string): Promise<string> {
    const data = await this.query(shop, accessToken, 'Reading the shop', SHOP_EMAIL, {}, z.object({ shop: z.object({ email: z.string().min(3) }) }));
    return data.shop.email;
  }

  /**
   * One GraphQL operation with the store's token; the answer is checked against `shape` before
   * anyone reads it. A 401 (the token expired or was replaced sooner than we knew) is answered
   * by a fresh token and one more try.
   */
  async query<T>(
    shop: string,
    accessToken: string,
    what: string,
    query: string,
    variables: Record<string, unknown>,
    shape: z.ZodType<T>,
  ): Promise<T> {
    const send = (token: string) => {
      const client = new this.shopify.clients.Graphql({ session: offlineSession(this.shopify, shop, token) });
      return callShopify(what, (signal) => client.request(query, { variables, signal }));
    };
    const response = await send(accessToken).catch(async (err: unknown) => {
      if (!isUnauthorized(err)) throw err;
      return send(await this.tokens.afterRejection(shop, accessToken));
    });
    const parsed = shape.safeParse(response.data);
    if (!parsed.success) throw new UpstreamError(`${what}: Shopify's answer lacks ${parsed.error.issues[0]?.path.join('.') || 'data'}`);
    return parsed.data;
  }
}
