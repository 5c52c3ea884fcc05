// Longer than most files on purpose: a store's whole life (install, settings, senders sealed at
// rest, uninstall and redaction) decided in one service.
import { z } from 'zod';
import { CONTACT_CHANNELS, STOREFRONT_OFFERS, type ContactChannel } from '../channels.ts';
import { DEFAULT_BATCH_POLICY, type BatchPolicy } from '../config.ts';
import { nowIso } from '../core/clock.ts';
import { emailSchema, normaliseEmail } from '../core/email.ts';
import { ownStore, type Caller } from '../core/http/caller.ts';
import { NotConfigured, NotFound, ValidationFailed } from '../core/problems.ts';
import { parseSmtpUrl } from '../core/mail/smtp-url.ts';
import { isObviouslyInternalHost, STRICT_OUTBOUND, type OutboundPolicy } from '../core/net/outbound-guard.ts';
import { SecretBox } from '../core/sealed-secrets.ts';
import type { SmsAccount } from '../sms/schemas.ts';
import { platformOfDomain, shopSchema, smsAccountSchema, type Store, type StoreDomains, type StoreSettingsPatch } from './schemas.ts';
import { PLATFORM_NAME, requireIdsOfPlatform, type PointedIds } from '../core/platforms.ts';
import { effectiveSettings, parseStoredSettings, storeSettingsSchema, type EffectiveSettings } from './settings.ts';
import type { StoreRow, StoreRepository } from './repository.ts';

export type { StoreRow };

export interface SendingProfile {
  sending: boolean;
  settings: EffectiveSettings;
  smtpUrl: string | undefined;
  /** The store's own Twilio account, when it set one. */
  smsAccount: SmsAccount | undefined;
  /**
   * Twilio vouched for that account and its sender when it was saved. One saved before the
   * service asked still sends the store's texts, but its webhooks act on nothing until saved again.
   */
  smsAccountVerified: boolean;
}

/** A store's Twilio account as it is sealed: with when Twilio vouched for it (absent on accounts saved before the service asked). */
const sealedSmsAccountSchema = smsAccountSchema.extend({ verifiedAt: z.string().optional() });

/**
 * What another feature does when a store changes hands, given the store and its new owner:
 * ends what the former owner could still use (sessions, links, bound agents). Returns a line for
 * the operator when it ended something.
 */
export type OwnerChangeListener = (shop: string, newOwner: string) => Promise<string | undefined>;

/** A store after `transferStore`, and what the former owner lost. */
export interface Transfer {
  store: Store;
  ended: string[];
}

/**
 * Asks Twilio whether a store's account is one it holds and the sender one of that account's;
 * throws the problem to answer when not (src/sms/account-check.ts).
 */
export type SmsAccountCheck = (account: SmsAccount) => Promise<void>;

export interface StoreServiceOptions {
  secrets?: SecretBox;
  /** Without it, no store may set its own Twilio account: one Twilio has not vouched for is never saved. */
  smsAccountCheck?: SmsAccountCheck;
  defaults?: BatchPolicy;
  /** Where a store's own mail server may be; internal addresses are refused unless allowed here. */
  tenantOutbound?: OutboundPolicy;
  /** Run on every change of owner, by whatever path: the CLI, a Shopify (re)install. */
  onOwnerChange?: OwnerChangeListener[];
  /** Whether the service holds working credentials for the store's platform (its connection's); without it, none. */
  adminApiConnected?: (domain: string, platform: string) => Promise<boolean>;
  /** Store domains that tell their platform by themselves (the platform registry's); without them, every new store names its own. */
  storeDomains?: StoreDomains;
}

/**
 * Stores: their owners, whether they are installed, and their sending settings (their credentials
 * on their platform are their connection's, src/core/connectors). Agents bind to stores; dispatch
 * reads settings here.
 */
export class StoreService {
  private readonly secrets: SecretBox;
  private readonly defaults: BatchPolicy;
  private readonly tenantOutbound: OutboundPolicy;
  private readonly onOwnerChange: OwnerChangeListener[];
  private readonly smsAccountCheck: SmsAccountCheck;
  private readonly adminApiConnected: (domain: string, platform: string) => Promise<boolean>;
  private readonly storeDomains: StoreDomains;
  /** Each kept row's settings, worked out once: the row is dropped from memory on the store's next change, and these with it. */
  private readonly settingsByRow = new WeakMap<object, EffectiveSettings>();

  constructor(
    private readonly store: StoreRepository,
    options: StoreServiceOptions = {},
  ) {
    this.secrets = options.secrets ?? SecretBox.fromKey(undefined);
    this.defaults = options.defaults ?? DEFAULT_BATCH_POLICY;
    this.tenantOutbound = options.tenantOutbound ?? STRICT_OUTBOUND;
    this.onOwnerChange = options.onOwnerChange ?? [];
    this.adminApiConnected = options.adminApiConnected ?? (async () => false);
    this.storeDomains = options.storeDomains ?? [];
    this.smsAccountCheck =
      options.smsAccountCheck ??
      (async () => {
        throw new NotConfigured('Twilio accounts cannot be verified here, so a store cannot set its own.');
      });
  }

  /** The operator's `restock store create`: creates the store or changes its owner. */
  async createStore(domain: string, ownerEmail: string, platform?: string): Promise<Store> {
    return (await this.transferStore(domain, ownerEmail, platform)).store;
  }

  /**
   * `createStore`, telling what the former owner lost when the owner changed. A new store is on
   * `platform`, which its domain may tell by itself (a myshopify.com domain is a Shopify store's);
   * a store that exists keeps its own.
   */
  async transferStore(domain: string, ownerEmail: string, platform?: string): Promise<Transfer> {
    const errors = [];
    const domainCheck = shopSchema.safeParse(domain);
    if (!domainCheck.success) errors.push({ pointer: '/domain', message: domainCheck.error.issues[0]!.message });
    const emailCheck = emailSchema.safeParse(ownerEmail);
    if (!emailCheck.success) errors.push({ pointer: '/owner', message: emailCheck.error.issues[0]!.message });
    const existing = domainCheck.success ? await this.store.find(domain.toLowerCase()) : undefined;
    const platformCheck = existing ? { platform: existing.platform ?? 'shopify' } : newStorePlatform(this.storeDomains, domain, platform);
    // A domain that is no store's tells nothing of its platform: that error alone is said.
    if ('error' in platformCheck && domainCheck.success) errors.push({ pointer: '/platform', message: platformCheck.error });
    if (errors.length || 'error' in platformCheck) throw new ValidationFailed(errors);
    const now = nowIso();
    const owner = normaliseEmail(ownerEmail);
    const row = { domain: domain.toLowerCase(), owner_email: owner, created_at: now, updated_at: now, platform: platformCheck.platform };
    return this.changingOwner(row.domain, owner, async () => this.present(await this.store.upsert(row)));
  }

  /**
   * Refuses ids of another platform than the store's (each named by its pointer): the store's
   * own platform, else what its domain tells (a myshopify.com store not made yet); a store the
   * service does not know, on a domain of its own, takes the ids as given.
   */
  async requireStorePlatform(domain: string, ids: PointedIds): Promise<void> {
    const platform = (await this.store.current(domain.toLowerCase()))?.platform ?? platformOfDomain(this.storeDomains, domain);
    requireIdsOfPlatform({ domain: domain.toLowerCase(), platform }, ids);
  }

  /**
   * The one ownership change every path goes through. When the owner differs, the listeners run
   * before the new owner is written (a crash in between leaves the former owner locked out, not
   * in) and again after it (a session or link opened in between is ended too).
   */
  private async changingOwner(domain: string, owner: string, write: () => Promise<Store>): Promise<Transfer> {
    const before = await this.store.find(domain);
    if (!before || before.owner_email === owner) return { store: await write(), ended: [] };
    const ended = await this.endFormerOwnerAccess(domain, owner);
    const store = await write();
    return { store, ended: [...ended, ...(await this.endFormerOwnerAccess(domain, owner))] };
  }

  private async endFormerOwnerAccess(domain: string, owner: string): Promise<string[]> {
    const lines: string[] = [];
    for (const listener of this.onOwnerChange) {
      const line = await listener(domain, owner);
      if (line !== undefined) lines.push(line);
    }
    return lines;
  }

  findStore(domain: string): Promise<StoreRow | undefined> {
    return this.store.find(domain.toLowerCase());
  }

  /** The store's domain when it is active (known and not uninstalled); one narrow read. */
  async activeStore(domain: string): Promise<string | undefined> {
    const row = await this.store.status(domain.toLowerCase());
    return row?.status === 'active' ? row.domain : undefined;
  }

  /**
   * Which channels beside e-mail the store's sign-up form offers: each channel's switch (the
   * channel registry's default when unset), where the channel can be sent for the store — by the
   * service itself (`offered`, its features' word), or from the store's own account (SMS's sender,
   * the one channel a store may set its own account for, kept here).
   */
  async storefrontChannels(domain: string, offered: Partial<Record<ContactChannel, boolean>>): Promise<Record<ContactChannel, boolean>> {
    const chosen = Object.fromEntries(CONTACT_CHANNELS.map((channel) => [channel, false])) as Record<ContactChannel, boolean>;
    const row = await this.store.storefrontOffer(domain);
    if (row?.status !== 'active') return chosen;
    const stored = parseStoredSettings(row.settings);
    const ownAccount: Partial<Record<ContactChannel, boolean>> = { sms: row.sms_sender_sealed !== null };
    for (const [channel, offer] of STOREFRONT_OFFERS) chosen[channel] = (stored[channel] ?? offer.byDefault) !== false && (offered[channel] === true || ownAccount[channel] === true);
    return chosen;
  }

  /** getStore: the store's configuration, for a caller bound to it. */
  async storeFor(caller: Caller, domain: string): Promise<Store> {
    return this.getStore(ownStore(caller, domain));
  }

  /**
   * updateStoreSettings, for a caller bound to the store: the senders first, as they are the
   * changes that can still be refused (Twilio does not vouch for the account, no key to seal
   * with), then the other settings. The Twilio account is checked before anything is written.
   */
  async updateStoreSettings(caller: Caller, domain: string, patch: StoreSettingsPatch): Promise<Store> {
    const store = ownStore(caller, domain);
    const { smtpUrl, smsSender, ...settings } = patch;
    if (smsSender) await this.smsAccountCheck(smsSender);
    if (smtpUrl !== undefined) await this.setSmtpUrl(store, smtpUrl);
    if (smsSender !== undefined) await this.setSmsSender(store, smsSender);
    return Object.keys(settings).length > 0 ? this.updateSettings(store, settings) : this.getStore(store);
  }

  /** The store as it is, for the service's own work (no tenancy: see `storeFor`). */
  async getStore(domain: string): Promise<Store> {
    return this.present(await this.mustFind(domain));
  }

  /** Changes the store's settings: fields given replace the stored ones, `null` returns one to the default. */
  async updateSettings(domain: string, patch: Record<string, unknown>): Promise<Store> {
    const row = await this.mustFind(domain);
    const merged: Record<string, unknown> = { ...parseStoredSettings(row.settings) };
    for (const [key, value] of Object.entries(patch)) {
      if (value === null) delete merged[key];
      else merged[key] = value;
    }
    const settings = storeSettingsSchema.parse(merged);
    await this.store.update(row.domain, { settings: JSON.stringify(settings), updated_at: nowIso() });
    return this.getStore(row.domain);
  }

  /**
   * The store's own SMTP server (its credentials sealed at rest); null goes back to the service's
   * sender. A host that can only be internal is refused now; a name that resolves to an internal
   * address is refused at every connection (core/net/outbound-guard.ts).
   */
  async setSmtpUrl(domain: string, smtpUrl: string | null): Promise<Store> {
    const host = smtpUrl === null ? undefined : hostOf(smtpUrl);
    if (host !== undefined && isObviouslyInternalHost(host, this.tenantOutbound)) {
      throw new ValidationFailed([
        { pointer: '/body/smtpUrl', message: 'must name a mail server on the internet: loopback, private, link-local and internal hosts are refused' },
      ]);
    }
    const row = await this.mustFind(domain);
    const sealed = smtpUrl === null ? null : await this.secrets.seal(smtpUrl);
    await this.store.update(row.domain, { smtp_url_sealed: sealed, updated_at: nowIso() });
    return this.getStore(row.domain);
  }

  /**
   * The store's own Twilio account (sealed at rest, like its SMTP URL), once Twilio vouched for it
   * and its sender (updateStoreSettings asks first), with when it did; null goes back to the service's.
   */
  private async setSmsSender(domain: string, account: SmsAccount | null): Promise<Store> {
    const row = await this.mustFind(domain);
    const sealed = account === null ? null : await this.secrets.seal(JSON.stringify({ ...account, verifiedAt: nowIso() }));
    await this.store.update(row.domain, { sms_sender_sealed: sealed, updated_at: nowIso() });
    return this.getStore(row.domain);
  }

  /** Settings dispatch applies to the store: its own, else the service defaults. */
  async settingsOf(domain: string): Promise<EffectiveSettings> {
    const row = await this.store.current(domain);
    if (!row) return this.settingsIn(row);
    let settings = this.settingsByRow.get(row);
    if (!settings) {
      settings = deepFreeze(this.settingsIn(row));
      this.settingsByRow.set(row, settings);
    }
    return settings;
  }

  /**
   * What dispatch needs of a store, from one read: whether it still sends (not once its app was
   * uninstalled), its settings, and its own SMTP server when it set one.
   */
  async sendingProfile(domain: string): Promise<SendingProfile> {
    const row = await this.store.find(domain);
    const sms = row?.sms_sender_sealed ? await this.openSmsAccount(row.sms_sender_sealed) : undefined;
    return {
      sending: row === undefined || row.status === 'active',
      settings: this.settingsIn(row),
      smtpUrl: row?.smtp_url_sealed ? await this.secrets.open(row.smtp_url_sealed) : undefined,
      smsAccount: sms?.account,
      smsAccountVerified: sms?.verified ?? false,
    };
  }

  /** A sealed account that no longer parses counts as none: the service's sender is used. */
  private async openSmsAccount(sealed: string): Promise<{ account: SmsAccount; verified: boolean } | undefined> {
    try {
      const parsed = sealedSmsAccountSchema.safeParse(JSON.parse(await this.secrets.open(sealed)));
      if (!parsed.success) return undefined;
      const { verifiedAt, ...account } = parsed.data;
      return { account, verified: verifiedAt !== undefined };
    } catch {
      return undefined;
    }
  }

  /**
   * An app installed on the store's platform (the Shopify app, by OAuth or token exchange): the
   * store is kept, active and owned by `ownerEmail`. Its credentials are its connection's.
   */
  async installApp(domain: string, ownerEmail: string, platform: string): Promise<Store> {
    const now = nowIso();
    const owner = normaliseEmail(ownerEmail);
    const transfer = await this.changingOwner(domain.toLowerCase(), owner, async () =>
      this.present(await this.store.install({ domain: domain.toLowerCase(), owner_email: owner, created_at: now, updated_at: now, platform })),
    );
    return transfer.store;
  }

  /**
   * A store of another platform than Shopify connected (its keys held by that platform's
   * feature): it sends again if it had been disconnected.
   */
  async markConnected(domain: string): Promise<void> {
    const now = nowIso();
    await this.store.update(domain.toLowerCase(), { status: 'active', installed_at: now, uninstalled_at: null, updated_at: now });
  }

  /** `app/uninstalled`, a connection ended: stop sending (the store's data stays until `shop/redact`). */
  async uninstall(domain: string): Promise<void> {
    const now = nowIso();
    await this.store.update(domain.toLowerCase(), { status: 'uninstalled', uninstalled_at: now, updated_at: now });
  }

  /** `shop/redact`: the store row goes (its subscriptions and alerts are erased by their features). */
  forgetStore(domain: string): Promise<void> {
    return this.store.remove(domain.toLowerCase());
  }

  /**
   * Active stores that set `setting` themselves, a page at a time in domain order after `after`,
   * with their owner and settings in force: for background work that visits them (owner notices).
   * `next` is the cursor of the following page, null after the last.
   */
  async storesWithOwnSetting(
    setting: keyof EffectiveSettings & string,
    after: string | null,
    limit: number,
  ): Promise<{ stores: Array<{ domain: string; ownerEmail: string; settings: EffectiveSettings }>; next: string | null }> {
    const rows = await this.store.withOwnSetting(setting, after, limit);
    const stores = rows
      .filter((row) => setting in parseStoredSettings(row.settings))
      .map((row) => ({ domain: row.domain, ownerEmail: row.owner_email, settings: this.settingsIn(row) }));
    return { stores, next: rows.length < limit ? null : rows.at(-1)!.domain };
  }

  private settingsIn(row: StoreRow | undefined): EffectiveSettings {
    return effectiveSettings(row ? parseStoredSettings(row.settings) : {}, this.defaults);
  }

  private async mustFind(domain: string): Promise<StoreRow> {
    const row = await this.findStore(domain);
    if (!row) throw new NotFound(`No store ${domain}.`);
    return row;
  }

  private async present(row: StoreRow): Promise<Store> {
    return {
      domain: row.domain,
      ownerEmail: row.owner_email,
      createdAt: row.created_at,
      status: row.status,
      platform: row.platform ?? 'shopify',
      installedAt: row.installed_at,
      adminApiConnected: await this.adminApiConnected(row.domain, row.platform ?? 'shopify'),
      ownSmtp: row.smtp_url_sealed !== null,
      ownSmsSender: row.sms_sender_sealed !== null,
      settings: this.settingsIn(row),
    };
  }
}

/** Frozen through and through: settings shared by every request must not be changed by one. */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}

/** Whether the store is the Shopify app's: a Shopify store installed through it (the operator's Shopify stores are not). */
export function installedAsShopifyApp(row: Pick<StoreRow, 'platform' | 'installed_at'> | undefined): boolean {
  return row?.platform === 'shopify' && row.installed_at !== null;
}

const PLATFORM = new RegExp(`^${PLATFORM_NAME}$`);

/** A new store's platform: the one given, which must agree with what the domain tells, else the domain's. */
function newStorePlatform(domains: StoreDomains, domain: string, given: string | undefined): { platform: string } | { error: string } {
  const told = platformOfDomain(domains, domain);
  if (given === undefined) return told ? { platform: told } : { error: `is required: ${domain.toLowerCase()} does not tell its platform (shopify, woocommerce, bigcommerce, ...)` };
  if (!PLATFORM.test(given)) return { error: 'must be a platform name in lower case, such as shopify, woocommerce or bigcommerce' };
  if (told && told !== given) return { error: `must be ${told}: ${domain.toLowerCase()} is a ${told} store's domain` };
  return { platform: given };
}

/** The host of a URL the settings schema already accepted (one stored earlier may not parse: the transport refuses it then). */
function hostOf(smtpUrl: string): string | undefined {
  try {
    return parseSmtpUrl(smtpUrl, { options: 'none' }).host;
  } catch {
    return undefined;
  }
}
