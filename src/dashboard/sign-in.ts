import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { isoAfter, nowIso } from '../core/clock.ts';
import type { MailTransport } from '../core/mail/transport.ts';
import type { TokenSigner } from '../core/signed-token.ts';
import { NotConfigured, Problem } from '../core/problems.ts';
import type { StoreRow } from '../stores/service.ts';
import { installedAsShopifyApp, type StoreService } from '../stores/service.ts';
import type { DashboardRepository } from './repository.ts';

/** What signing in asks of the stores: a store as it is (its owner). */
export type SignInStores = Pick<StoreService, 'findStore'>;

export interface SignInOptions {
  store: DashboardRepository;
  stores: SignInStores;
  mail: MailTransport;
  baseUrl: string;
  linkTtlMinutes: number;
  sessionHours: number;
  /** Signs the known-device cookie; without it (the CLI) no device is recognised. */
  signer?: TokenSigner;
  /** The shop a Shopify session token is for; throws a problem when the token is refused. Absent without the Shopify app. */
  shopOfSessionToken?: (token: string) => Promise<string>;
}

const HOUR_MS = 3_600_000;
const LINKS_PER_STORE_PER_HOUR = 5;
const DEVICE = 'dashboard-device';

/** A signed-in owner: the store they may see, and the token their forms carry against cross-site posts. */
export interface OwnerSession {
  shop: string;
  /** `shopify`: a session opened from the Shopify admin before its pages took session tokens instead. */
  via: 'email' | 'shopify';
  csrfToken: string;
  expiresAt: string;
}

export interface IssuedLink {
  link: string;
  shop: string;
  ownerEmail: string;
}

export interface OpenedSession {
  /** The cookie's secret; only its hash is stored. */
  secret: string;
  session: OwnerSession;
  /** A long-lived cookie naming this browser as one the owner signed in from (see `requestLink`). */
  deviceToken: string | undefined;
}

/**
 * How a store's owner signs in to the dashboard: a one-time link mailed to the store's owner
 * address, which opens a cookie session; inside the Shopify admin, each request instead carries the
 * session token Shopify hands the embedded app.
 */
export class DashboardSignIn {
  constructor(private readonly options: SignInOptions) {}

  get shopifyAvailable(): boolean {
    return this.options.shopOfSessionToken !== undefined;
  }

  /**
   * Mails a sign-in link to the owner of `shop`. Says nothing about whether the store exists:
   * the page answers the same either way, so the form cannot be used to list customers. At most
   * LINKS_PER_STORE_PER_HOUR mails an hour reach one owner from unknown browsers, so the form
   * cannot be used to flood them either; a browser the current owner signed in from before
   * (`deviceToken`) is not held to that budget, so strangers spending it cannot lock the owner
   * out (the per-address limit of the route still applies to it).
   */
  async requestLink(shop: string, deviceToken?: string): Promise<void> {
    const store = await this.options.stores.findStore(shop);
    if (!store || store.status !== 'active') return;
    const since = new Date(Date.now() - HOUR_MS).toISOString();
    const known = deviceToken !== undefined && this.options.signer?.verify(DEVICE, deviceToken) === deviceSubject(store.domain, store.owner_email);
    if (!known && (await this.options.store.linksSince(store.domain, since)) >= LINKS_PER_STORE_PER_HOUR) return;
    const issued = await this.linkFor(store);
    await this.options.mail.send({
      to: issued.ownerEmail,
      subject: `Sign in to Restock for ${issued.shop}`,
      text:
        `Someone asked to sign in to the Restock dashboard of ${issued.shop}.\n\n` +
        `Open this link to sign in (it works once, for ${this.options.linkTtlMinutes} minutes):\n${issued.link}\n\n` +
        `If it was not you, ignore this e-mail: nothing happens without the link.\n`,
      purpose: 'dashboard-sign-in',
      storeDomain: issued.shop,
    });
  }

  /** A new one-time link for an active store (the operator's `restock dashboard link` prints it). */
  async issueLink(shop: string): Promise<IssuedLink | undefined> {
    const store = await this.options.stores.findStore(shop);
    if (!store || store.status !== 'active') return undefined;
    return this.linkFor(store);
  }

  private async linkFor(store: StoreRow): Promise<IssuedLink> {
    const token = secret();
    const now = new Date();
    await this.options.store.insertLink({
      token_hash: hash(token),
      shop: store.domain,
      created_at: now.toISOString(),
      expires_at: isoAfter(this.options.linkTtlMinutes * 60_000, now),
      used_at: null,
    });
    return { link: `${this.options.baseUrl}/dashboard/sign-in/${token}`, shop: store.domain, ownerEmail: store.owner_email };
  }

  /** The store a link would sign in to, while it is unused and unexpired (shown before it is used). */
  async linkTarget(token: string): Promise<string | undefined> {
    const link = await this.options.store.findLink(hash(token));
    if (!link || link.used_at !== null || link.expires_at <= nowIso()) return undefined;
    return link.shop;
  }

  /** Uses a link (once) and opens a session for its store. */
  async useLink(token: string): Promise<OpenedSession | undefined> {
    const link = await this.options.store.useLink(hash(token), nowIso());
    return link && this.open(link.shop);
  }

  /**
   * The store a request from inside the Shopify admin speaks for, by the App Bridge session token
   * it carries. Checked on every request and nothing is kept: inside the admin's frame a session
   * cookie would be a third-party cookie, which browsers drop. The token must be for the store the
   * admin says it opened (`named`), and that store must have the app installed (else undefined).
   */
  async shopOfSessionToken(token: string, named: string | undefined): Promise<string | undefined> {
    if (!this.options.shopOfSessionToken) throw new NotConfigured('The Shopify app is not configured on this service.');
    const shop = await this.options.shopOfSessionToken(token);
    if (named !== undefined && named.toLowerCase() !== shop) {
      throw new Problem('invalid-token', 'The Shopify session token was refused: it is for another store. Send a fresh one from App Bridge.');
    }
    const store = await this.options.stores.findStore(shop);
    return store?.status === 'active' && installedAsShopifyApp(store) ? store.domain : undefined;
  }

  async sessionFor(cookieSecret: string | undefined): Promise<OwnerSession | undefined> {
    if (!cookieSecret) return undefined;
    const row = await this.options.store.liveSession(hash(cookieSecret), nowIso());
    if (!row) return undefined;
    return { shop: row.shop, via: row.via as OwnerSession['via'], csrfToken: csrfTokenOf(cookieSecret), expiresAt: row.expires_at };
  }

  signOut(cookieSecret: string): Promise<void> {
    return this.options.store.endSession(hash(cookieSecret), nowIso());
  }

  sweep(): Promise<void> {
    return this.options.store.sweep(nowIso());
  }

  /** A cookie session, opened by a mailed link (the only way now: the admin's pages take session tokens). */
  private async open(shop: string): Promise<OpenedSession> {
    const via = 'email';
    const token = secret();
    const now = new Date();
    const expiresAt = isoAfter(this.options.sessionHours * 3600_000, now);
    await this.options.store.insertSession({ id_hash: hash(token), shop, via, created_at: now.toISOString(), expires_at: expiresAt, ended_at: null });
    const owner = (await this.options.stores.findStore(shop))?.owner_email;
    const deviceToken = owner !== undefined ? this.options.signer?.sign(DEVICE, deviceSubject(shop, owner)) : undefined;
    return { secret: token, session: { shop, via, csrfToken: csrfTokenOf(token), expiresAt }, deviceToken };
  }
}

/** Whether a form's token is the one its session hands out. */
export function csrfTokenMatches(session: OwnerSession, given: unknown): boolean {
  if (typeof given !== 'string') return false;
  const expected = Buffer.from(session.csrfToken);
  const actual = Buffer.from(given);
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

/**
 * Bound to the owner too: once the store changes hands, the former owner's browsers are strangers
 * again. A digest, so the cookie is cookie-safe and does not carry the owner's address.
 */
function deviceSubject(shop: string, ownerEmail: string): string {
  return hash(`${shop}\n${ownerEmail}`);
}

function secret(): string {
  return randomBytes(32).toString('base64url');
}

function hash(value: string): string {
  return createHash('sha256').update(value).digest('base64url');
}

/** Derived from the session's secret, so it needs no storage and dies with the session. */
function csrfTokenOf(sessionSecret: string): string {
  return createHmac('sha256', sessionSecret).update('dashboard-forms').digest('base64url');
}
