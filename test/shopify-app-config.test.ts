/**
 * The app's configuration as the Shopify CLI reads it: shopify.app.toml at the root and the theme
 * app extension in extensions/restock-notify. No npm package validates these offline with the
 * CLI's own schemas on Node 20 (`@shopify/app` 3.58 exports only its plugin API; `@shopify/cli` 4
 * needs Node 22), so the CLI's rules are written down here as data, each citing where the CLI (the
 * Shopify/cli repository, packages/app/src/cli/models) or shopify.dev states it. Then Shopify's
 * theme checker runs on the extension, with the theme app extension preset the CLI uses, offline.
 * No storage: nothing here runs per database.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'smol-toml';
import { FLOW_TRIGGERS } from '../src/shopify/flow.ts';
import { z } from 'zod';
import { loadConfig } from '../src/config.ts';
import { APP_PROXY_PATH } from '../src/shopify/platform.ts';
import { WEBHOOK_PATH } from '../src/shopify/feature.ts';
import { CALLBACK_PATH } from '../src/shopify/install.ts';
import { orderCancelledPayload, orderCreatePayload, refundCreatePayload } from '../src/shopify/order-payloads.ts';
import { HANDLED_TOPICS } from '../src/shopify/payloads.ts';
import { loadWidgetAsset, THEME_EXTENSION_ASSETS, WIDGET_FILES } from '../src/storefront/widget-asset.ts';
import { coversAny, loadAdminGraphql } from './fixtures/shopify-admin-schema.ts';
import { describe, it } from './fixtures/suites.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const EXTENSION = path.join(ROOT, 'extensions/restock-notify');
const readToml = (file: string) => parse(readFileSync(file, 'utf8')) as Record<string, unknown>;

/** What `client_id` holds in the repository: the operator's key is given to the CLI at deploy. */
const CLIENT_ID_PLACEHOLDER = 'replace-with-SHOPIFY_API_KEY';

// ---- The CLI's rules for shopify.app.toml ----

/** models/app/validation/common.ts `validateUrl`: an http(s) URL on one line. */
const url = z.string().refine((value) => /^https?:$/.test(safeUrl(value)?.protocol ?? '') && !value.includes('\n'), 'Invalid URL');
/** models/app/validation/common.ts `validateRelativeUrl`: an HTTPS URL or a path from application_url. */
const httpsOrRelative = z.string().refine((value) => value.startsWith('/') || safeUrl(value)?.protocol === 'https:', 'URL must be HTTPS URL or start with /');
/** specifications/validation/common.ts `WebhookSubscriptionUriValidation`: a path, an HTTPS URL, Pub/Sub, Kafka or EventBridge. */
const webhookUri = z.string().refine((uri) => uri.startsWith('/') || /^(https:\/\/|pubsub:\/\/|kafka:\/\/|arn:aws:events:)/.test(uri), "URI format isn't correct");
/** webhook_subscription_schema.ts `ComplianceTopic`. */
const COMPLIANCE_TOPICS = ['customers/redact', 'customers/data_request', 'shop/redact'] as const;
/**
 * Every top-level key the CLI's app configuration and its config specifications know (app.ts
 * `AppSchema`, app_config_*.ts). Anything else would be passed through unread: a typo.
 */
const KNOWN_TOP_LEVEL = ['client_id', 'build', 'extension_directories', 'web_directories', 'name', 'handle', 'application_url', 'embedded', 'app_preferences', 'access', 'access_scopes', 'auth', 'webhooks', 'app_proxy', 'pos', 'events', 'customer_authentication', 'organization_id'];
/**
 * The merchant-facing prefixes Shopify offers for an app proxy, and the subpath's rule
 * (https://shopify.dev/docs/apps/online-store/app-proxies).
 */
const PROXY_PREFIXES = ['apps', 'a', 'community', 'tools'];

const appConfigSchema = z.looseObject({
  // app.ts AppSchema
  client_id: z.string().min(1),
  build: z
    .strictObject({ automatically_update_urls_on_dev: z.boolean().optional(), dev_store_url: z.string().optional() })
    // services/context.ts: "The `include_config_on_deploy` field is no longer supported"
    .optional(),
  // app_config_branding.ts
  name: z.string().max(30),
  handle: z.string().max(256).regex(/^\w*(?!-)[_a-z0-9-]+(?<!-)$/).optional(),
  // app_config_app_home.ts
  application_url: url,
  embedded: z.boolean(),
  // app_config_app_access.ts: [auth] is required, the rest optional
  access_scopes: z
    .strictObject({
      scopes: z.string().optional(),
      required_scopes: z.array(z.string()).optional(),
      optional_scopes: z.array(z.string()).optional(),
      use_legacy_install_flow: z.boolean().optional(),
    })
    .optional(),
  auth: z.strictObject({ redirect_urls: z.array(url) }),
  // app_config_webhook_schemas/webhooks_schema.ts and webhook_subscription_schema.ts
  webhooks: z.strictObject({
    api_version: z.string(),
    subscriptions: z
      .array(
        z.strictObject({
          topics: z.array(z.string()).optional(),
          compliance_topics: z.array(z.enum(COMPLIANCE_TOPICS)).optional(),
          uri: webhookUri,
          actions: z.array(z.string()).optional(),
          include_fields: z.array(z.string()).optional(),
          filter: z.string().optional(),
          payload_query: z.string().trim().min(1).optional(),
          name: z.string().trim().min(1).max(50).optional(),
        }),
      )
      .optional(),
  }),
  // app_config_app_proxy.ts
  app_proxy: z
    .strictObject({ url: httpsOrRelative, subpath: z.string().regex(/^[A-Za-z0-9_-]{1,30}$/).refine((subpath) => !['admin', 'services', 'password', 'login'].includes(subpath)), prefix: z.enum(PROXY_PREFIXES) })
    .optional(),
  // app_config_point_of_sale.ts
  pos: z.strictObject({ embedded: z.boolean() }).optional(),
});

type AppConfig = z.infer<typeof appConfigSchema>;

/** validation/app_config_webhook.ts `validateSubscriptions`. */
function webhookSubscriptionErrors(subscriptions: NonNullable<AppConfig['webhooks']['subscriptions']>): string[] {
  const errors: string[] = [];
  const compliance = subscriptions.flatMap((subscription) => subscription.compliance_topics ?? []);
  if (new Set(compliance).size !== compliance.length) errors.push('You can’t have multiple subscriptions with the same compliance topic');
  const seen = new Set<string>();
  for (const [index, subscription] of subscriptions.entries()) {
    if (!subscription.topics?.length && !subscription.compliance_topics?.length) errors.push(`subscriptions[${index}]: Either topics or compliance_topics must be added`);
    for (const topic of subscription.topics ?? []) {
      const key = `${topic}::${subscription.uri}::${subscription.filter ?? ''}`;
      if (seen.has(key)) errors.push(`Multiple subscriptions with the exact same topic, uri, and filter: ${key}`);
      seen.add(key);
    }
  }
  return errors;
}

// ---- The CLI's rules for a theme app extension ----

/** schemas.ts `HandleSchema` and `UIDSchema`; specifications/theme.ts is the `theme` type over `BaseSchema`. */
const themeExtensionSchema = z.strictObject({
  type: z.literal('theme'),
  name: z.string().min(1),
  handle: z
    .string()
    .max(50)
    .regex(/^[a-zA-Z0-9-]+$/)
    .refine((handle) => !handle.startsWith('-') && !handle.endsWith('-'))
    .optional(),
  uid: z.string().max(250).regex(/^[a-zA-Z0-9-${}.()_`]+$/).optional(),
  description: z.string().optional(),
});

/** specifications/theme.ts: the folders and file types a theme app extension may hold, and its size limits. */
const THEME_FILES: Record<string, RegExp> = {
  assets: /\.(jpg|jpeg|json|js|css|png|svg|wasm)$/,
  blocks: /\.liquid$/,
  locales: /\.json$/,
  snippets: /\.liquid$/,
};
const BUNDLE_LIMIT_BYTES = 10 * 1024 * 1024;
const LIQUID_LIMIT_BYTES = 500 * 1024;
/**
 * The theme checker's `AssetSizeAppBlockJavaScript` (theme-check-common
 * checks/asset-size-app-block-javascript, `thresholdInBytes: 10000` in theme-check-node's
 * theme-app-extension preset; an error, so `shopify app deploy` refuses the extension;
 * https://shopify.dev/docs/storefronts/themes/tools/theme-check/checks/asset-size-app-block-javascript).
 * The checker measures only the script a block's schema names; the one that script loads from
 * beside itself is held to the same limit here.
 */
const APP_BLOCK_JAVASCRIPT_LIMIT_BYTES = 10_000;

/** Every file of the extension but its TOML, relative to it. */
function extensionFiles(dir = ''): string[] {
  return readdirSync(path.join(EXTENSION, dir), { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) return extensionFiles(file);
    return file === 'shopify.extension.toml' ? [] : [file];
  });
}

function safeUrl(value: string): URL | undefined {
  try {
    return new URL(value);
  } catch {
    return undefined;
  }
}

/** Topics as the webhook worker names them (the library's spelling): products/update → PRODUCTS_UPDATE. */
const libraryTopic = (topic: string) => topic.toUpperCase().replace(/\//g, '_');

/** The schema each order topic's payload is parsed with: its subscription asks Shopify for exactly those fields. */
const PARSED_FIELDS: Record<string, z.ZodType> = {
  'orders/create': orderCreatePayload,
  'orders/cancelled': orderCancelledPayload,
  'refunds/create': refundCreatePayload,
};

/**
 * The `include_fields` a schema reads, written as Shopify writes them ("line_items.id" for a
 * field of each line, https://shopify.dev/docs/apps/build/webhooks/customize/modify-payloads):
 * top-level fields, and one level into arrays of objects; deeper objects come whole.
 */
function includeFieldsOf(schema: z.ZodType, prefix = ''): string[] {
  const shape = objectShape(schema);
  if (!shape) return [];
  return Object.entries(shape).flatMap(([key, field]) => {
    const element = prefix === '' ? arrayElement(field) : undefined;
    const nested = element && objectShape(element) ? includeFieldsOf(element, `${key}.`) : [];
    return nested.length > 0 ? nested : [`${prefix}${key}`];
  });
}

/** Past optional, nullable and default wrappers to the schema they wrap. */
function unwrapped(schema: z.ZodType): z.core.$ZodType {
  let inner: z.core.$ZodType = schema;
  while ('innerType' in inner._zod.def) inner = (inner._zod.def as { innerType: z.core.$ZodType }).innerType;
  return inner;
}

function objectShape(schema: z.ZodType): Record<string, z.ZodType> | undefined {
  const inner = unwrapped(schema);
  return inner instanceof z.ZodObject ? (inner.shape as Record<string, z.ZodType>) : undefined;
}

function arrayElement(schema: z.ZodType): z.ZodType | undefined {
  const inner = unwrapped(schema);
  return inner instanceof z.ZodArray ? (inner.element as z.ZodType) : undefined;
}

const defaults = loadConfig({ SHOPIFY_API_KEY: 'key', SHOPIFY_API_SECRET: 'secret', RESTOCK_ENCRYPTION_KEY: Buffer.alloc(32).toString('base64') }).platforms.shopify!;

describe('shopify.app.toml', () => {
  const raw = readToml(path.join(ROOT, 'shopify.app.toml'));
  const config = appConfigSchema.parse(raw);

  it('holds every field the CLI requires, in the shapes its schemas accept, and nothing it does not know', () => {
    assert.deepEqual(Object.keys(raw).filter((key) => !KNOWN_TOP_LEVEL.includes(key)), []);
    assert.deepEqual(webhookSubscriptionErrors(config.webhooks.subscriptions ?? []), []);
    assert.equal(config.embedded, true);
    assert.equal(config.access_scopes?.use_legacy_install_flow, false, 'Shopify-managed installation');
    assert.equal(config.pos?.embedded, false);
    assert.equal(config.build?.automatically_update_urls_on_dev, false);
  });

  it('leaves the client id for the operator to give at deploy', () => {
    assert.equal(config.client_id, CLIENT_ID_PLACEHOLDER);
  });

  it('asks for the scopes and the API version the service uses by default', () => {
    assert.equal(config.access_scopes?.scopes, defaults.scopes.join(','));
    assert.equal(config.webhooks.api_version, defaults.apiVersion);
  });

  it('subscribes exactly the topics the webhook worker handles, the three compliance topics included', () => {
    const subscriptions = config.webhooks.subscriptions ?? [];
    const declared = subscriptions.flatMap((subscription) => [...(subscription.topics ?? []), ...(subscription.compliance_topics ?? [])]);
    assert.deepEqual(declared.map(libraryTopic).sort(), [...HANDLED_TOPICS].sort());
    assert.deepEqual(subscriptions.flatMap((subscription) => subscription.compliance_topics ?? []).sort(), [...COMPLIANCE_TOPICS].sort());
  });

  it('asks for a scope that covers every topic, as Shopify’s schema names the topic’s scopes', () => {
    const { webhookTopics } = loadAdminGraphql();
    const granted = new Set(defaults.scopes);
    for (const topic of (config.webhooks.subscriptions ?? []).flatMap((subscription) => subscription.topics ?? [])) {
      const known = webhookTopics.get(libraryTopic(topic));
      assert.ok(known, `${topic} is not a topic of the Admin API ${defaults.apiVersion}`);
      assert.equal(known.restName, topic);
      assert.ok(known.anyOf.length === 0 || coversAny(known.anyOf, granted), `${topic} needs one of ${known.anyOf.join(', ')}`);
    }
  });

  it('has Shopify send each order topic exactly the fields its payload schema reads, in a subscription of its own', () => {
    const subscriptions = config.webhooks.subscriptions ?? [];
    for (const [topic, schema] of Object.entries(PARSED_FIELDS)) {
      const subscription = subscriptions.find((candidate) => candidate.topics?.includes(topic));
      assert.deepEqual(subscription?.topics, [topic], `${topic}: a subscription of its own, so its fields are its own`);
      assert.deepEqual([...(subscription.include_fields ?? [])].sort(), includeFieldsOf(schema).sort(), topic);
    }
    const unfiltered = subscriptions.filter((subscription) => subscription.include_fields === undefined).flatMap((subscription) => subscription.topics ?? []);
    assert.deepEqual(unfiltered.filter((topic) => topic in PARSED_FIELDS), [], 'no order topic arrives whole');
  });

  it('points every URL at the service’s routes on one origin', () => {
    const origin = new URL(config.application_url).origin;
    const urls = [config.application_url, ...config.auth.redirect_urls, ...(config.webhooks.subscriptions ?? []).map((s) => s.uri), config.app_proxy!.url];
    assert.deepEqual(new Set(urls.map((value) => new URL(value).origin)), new Set([origin]));
    assert.equal(new URL(config.application_url).pathname, '/shopify/install');
    assert.deepEqual(config.auth.redirect_urls.map((value) => new URL(value).pathname), [CALLBACK_PATH]);
    assert.deepEqual(new Set((config.webhooks.subscriptions ?? []).map((s) => new URL(s.uri).pathname)), new Set([WEBHOOK_PATH]));
    assert.equal(new URL(config.app_proxy!.url).pathname, APP_PROXY_PATH);
  });

  it('puts the app proxy where the theme block calls it', () => {
    const block = readFileSync(path.join(EXTENSION, 'blocks/notify-me.liquid'), 'utf8');
    assert.match(block, new RegExp(`data-proxy="/${config.app_proxy!.prefix}/${config.app_proxy!.subpath}"`));
  });
});

describe('the Flow trigger extensions', () => {
  // The trigger reference's rules (https://shopify.dev/docs/apps/build/flow/triggers/reference):
  // name and type required, type flow_trigger, a handle of at most 30 letters, digits and hyphens,
  // unique among the app's extensions; fields of the listed reference and custom types, a custom one with a key.
  const FIELD_TYPES = new Set(['customer_reference', 'order_reference', 'product_reference', 'single_line_text_field', 'number_decimal', 'email', 'url', 'boolean']);
  const flowExtensions = readdirSync(path.join(ROOT, 'extensions'), { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(path.join(ROOT, 'extensions', entry.name, 'shopify.extension.toml')))
    .map((entry) => ({ dir: entry.name, toml: readToml(path.join(ROOT, 'extensions', entry.name, 'shopify.extension.toml')) as { extensions?: Array<Record<string, unknown>>; settings?: { fields?: Array<Record<string, unknown>> } } }))
    .filter(({ toml }) => toml.extensions?.some((extension) => extension.type === 'flow_trigger'));

  it('declares the four triggers the service fires, each as the reference defines it', () => {
    const handles = flowExtensions.map(({ dir, toml }) => {
      assert.equal(toml.extensions!.length, 1, `${dir}: one extension per folder`);
      const extension = toml.extensions![0]!;
      assert.equal(typeof extension.name, 'string', `${dir}: name`);
      assert.match(String(extension.name), /^[A-Z][a-z0-9 ]+$/, `${dir}: sentence case, no punctuation`);
      assert.match(String(extension.handle), /^[A-Za-z0-9-]{1,30}$/, `${dir}: handle`);
      assert.equal(extension.handle, dir, `${dir}: the folder is named after the handle`);
      assert.equal(typeof extension.description, 'string', `${dir}: description`);
      const fields = toml.settings?.fields ?? [];
      assert.ok(fields.length > 0, `${dir}: fields`);
      for (const field of fields) {
        assert.ok(FIELD_TYPES.has(String(field.type)), `${dir}: field type ${String(field.type)}`);
        if (!String(field.type).endsWith('_reference')) assert.equal(typeof field.key, 'string', `${dir}: a custom field has a key`);
      }
      return String(extension.handle);
    });
    assert.deepEqual(handles.sort(), Object.values(FLOW_TRIGGERS).map((trigger) => trigger!.handle).sort());
  });
});

describe('the theme app extension', () => {
  it('is configured as the CLI’s theme extension template writes it, in extensions/ beside the app', () => {
    themeExtensionSchema.parse(readToml(path.join(EXTENSION, 'shopify.extension.toml')));
  });

  it('holds only the folders and file types the CLI deploys, within its size limits', () => {
    const files = extensionFiles();
    for (const file of files) {
      const folder = path.dirname(file);
      assert.ok(THEME_FILES[folder], `${file}: not in ${Object.keys(THEME_FILES).join(', ')}`);
      assert.match(file, THEME_FILES[folder]!);
    }
    const size = (file: string) => statSync(path.join(EXTENSION, file)).size;
    const total = (list: string[]) => list.reduce((sum, file) => sum + size(file), 0);
    assert.ok(total(files) <= BUNDLE_LIMIT_BYTES);
    assert.ok(total(files.filter((file) => /^(blocks|snippets)\//.test(file))) <= LIQUID_LIMIT_BYTES);
  });

  it('ships each storefront script exactly as the service serves it (rebuild: node --import tsx bin/build-theme-extension.ts)', async () => {
    const scripts = extensionFiles().filter((file) => file.endsWith('.js'));
    assert.deepEqual(scripts.sort(), WIDGET_FILES.map((file) => path.relative(EXTENSION, THEME_EXTENSION_ASSETS[file].pathname)).sort(), 'the widget and its channels script, nothing else');
    for (const file of WIDGET_FILES) {
      const shipped = readFileSync(THEME_EXTENSION_ASSETS[file]);
      const served = (await loadWidgetAsset(file)).body;
      const name = path.relative(ROOT, THEME_EXTENSION_ASSETS[file].pathname);
      assert.ok(shipped.equals(served), `${name} is not /${file} as the service serves it: run node --import tsx bin/build-theme-extension.ts`);
    }
  });

  it('keeps every script within the theme checker’s 10,000 bytes for app block JavaScript', (t) => {
    for (const file of WIDGET_FILES) {
      const name = path.basename(THEME_EXTENSION_ASSETS[file].pathname);
      const size = statSync(THEME_EXTENSION_ASSETS[file]).size;
      t.diagnostic(`${name}: ${size} B`);
      assert.ok(size <= APP_BLOCK_JAVASCRIPT_LIMIT_BYTES, `${name} is ${size} B; Shopify allows ${APP_BLOCK_JAVASCRIPT_LIMIT_BYTES} B`);
    }
  });

  it('passes Shopify’s theme checker (theme app extension preset) with no errors, without touching the network', async (t) => {
    const { offenses, log } = await themeCheckOffline(EXTENSION);
    const errors = offenses.filter((offense) => offense.severity === 0);
    assert.deepEqual(errors.map((offense) => `${offense.check} ${offense.uri}: ${offense.message}`), []);
    for (const offense of offenses) t.diagnostic(`theme check: ${offense.check}: ${offense.message}`);
    assert.ok(log.some((line) => line.includes('Loaded fallback resource')), 'the checker read the Liquid docs bundled with it');
  });
});

/**
 * Runs the checker as the CLI does before a deploy (`theme-check:theme-app-extension`). Its docs
 * updater would download the Liquid docs from GitHub into the user's cache; here it is pointed at
 * an empty local folder (`SHOPIFY_TLD_ROOT`) and a cache of its own (`XDG_CACHE_HOME`, read when
 * the package loads), so it falls back to the docs the package ships. Any request that would
 * still leave the machine is refused and fails the test.
 */
async function themeCheckOffline(root: string) {
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'restock-theme-check-'));
  const saved = { cache: process.env.XDG_CACHE_HOME, docs: process.env.SHOPIFY_TLD_ROOT };
  const attempts: string[] = [];
  const originals = [http.request, https.request, globalThis.fetch] as const;
  const refuse = (what: unknown) => {
    attempts.push(String(what));
    throw new Error('The theme checker tried to reach the network');
  };
  process.env.XDG_CACHE_HOME = path.join(scratch, 'cache');
  process.env.SHOPIFY_TLD_ROOT = path.join(scratch, 'no-docs');
  http.request = ((target: unknown) => refuse(target)) as typeof http.request;
  https.request = ((target: unknown) => refuse(target)) as typeof https.request;
  globalThis.fetch = (async (target: unknown) => refuse(target)) as typeof fetch;
  try {
    const { themeCheckRun } = await import('@shopify/theme-check-node');
    const log: string[] = [];
    const { offenses } = await themeCheckRun(root, 'theme-check:theme-app-extension', (message: string) => log.push(message));
    assert.deepEqual(attempts, [], 'no request left the machine');
    return { offenses, log };
  } finally {
    [http.request, https.request, globalThis.fetch] = originals;
    restoreEnv('XDG_CACHE_HOME', saved.cache);
    restoreEnv('SHOPIFY_TLD_ROOT', saved.docs);
    rmSync(scratch, { recursive: true, force: true });
  }
}

function restoreEnv(name: string, value: string | undefined): void {
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}
