/**
 * Finding 1's class, across the operator's settings: no URL-shaped setting is handed whole to a
 * client library, whose options its query string would become. Each is parsed into typed values
 * (or, for plain HTTP endpoints, used as a URL and nothing else), and a new one fails here until
 * it says which.
 */
import assert from 'node:assert/strict';
import { ConfigError, loadConfig, SETTINGS } from '../../src/config.ts';
import { openMailTransport } from '../../src/core/mail/transport.ts';
import { parsePostgresUrl, parseRedisUrl } from '../../src/core/service-urls.ts';
import { describe, it } from '../fixtures/suites.ts';

/** How each URL-shaped setting reaches its library. */
const URL_SETTINGS: Record<string, string> = {
  BASE_URL: 'ours: links and the OAuth issuer, never given to a library',
  DATABASE_URL: 'typed: core/service-urls.ts parsePostgresUrl (sslmode, application_name only)',
  REDIS_URL: 'typed: core/service-urls.ts parseRedisUrl (no options)',
  SMTP_URL: 'typed: core/mail/smtp-url.ts (name and three timeouts only)',
  STRIPE_API_URL: 'typed: core/stripe-client.ts takes host, port and protocol',
  KLAVIYO_API_URL: 'typed: config.ts keeps an origin only (no credentials, path, query or fragment); klaviyo/api.ts appends its paths and posts through the outbound guard; no library is given it',
  TWILIO_API_URL: 'typed: sms/settings.ts parseApiOrigin keeps the origin only (no credentials, path or query); the SDK is never given it, its HTTP client rewrites the origin',
  X402_FACILITATOR_URL: 'an HTTP endpoint the facilitator client posts to; no options',
  X402_TEST_FACILITATOR_URL: 'the same, for the test network (PAYMENTS_TEST_NETWORK)',
  MPP_TEMPO_RPC_URL: 'an HTTP endpoint the RPC transport posts to; no options',
  OTEL_EXPORTER_OTLP_ENDPOINT: 'typed: observability/settings.ts tracesUrlOf keeps scheme, host, port and path (no credentials, query or fragment); the exporter is given that with /v1/traces and nothing else',
};

const base = { DATA_DIR: '/tmp', LOG_LEVEL: 'silent' };

describe('finding 1: option injection in the operator’s URL-shaped settings', () => {
  it('finding 1: every URL-shaped setting says how it reaches its library', () => {
    // Every setting the environment is parsed with, the modules' slices included.
    const declared = SETTINGS.map((setting) => setting.name).filter((name) => /_(?:URL|URI|HOST|ENDPOINT)$/.test(name)).sort();
    assert.deepEqual(declared, Object.keys(URL_SETTINGS).sort());
  });

  it('finding 1: TWILIO_API_URL is an origin and nothing more', () => {
    for (const injected of ['http://127.0.0.1:9/?timeout=1', 'https://user:pass@api.example.com', 'https://api.example.com/2010-04-01', 'ftp://api.example.com']) {
      assert.throws(() => loadConfig({ ...base, TWILIO_API_URL: injected }), (err: Error) => err instanceof ConfigError && err.message.includes('TWILIO_API_URL'), injected);
    }
    assert.equal(loadConfig({ ...base, TWILIO_API_URL: 'http://127.0.0.1:4010/' }).channels.sms.apiUrl, 'http://127.0.0.1:4010');
  });

  it('finding 1: KLAVIYO_API_URL is an origin and nothing more', () => {
    for (const injected of ['https://a.klaviyo.com/?timeout=1', 'https://user:pass@a.klaviyo.com', 'https://a.klaviyo.com/api', 'ftp://a.klaviyo.com', 'https://a.klaviyo.com/#x']) {
      assert.throws(() => loadConfig({ ...base, KLAVIYO_API_URL: injected }), (err: Error) => err instanceof ConfigError && err.message.includes('KLAVIYO_API_URL'), injected);
    }
    assert.equal(loadConfig({ ...base, KLAVIYO_API_URL: 'http://127.0.0.1:4020/' }).klaviyo.apiUrl, 'http://127.0.0.1:4020');
  });

  it('finding 1: OTEL_EXPORTER_OTLP_ENDPOINT is an http(s) base URL and nothing more', () => {
    for (const injected of ['ftp://collector.example.com', 'http://user:pass@collector.example.com', 'http://collector.example.com/?compression=none', 'http://collector.example.com/#x', 'collector:4318']) {
      assert.throws(() => loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: injected }), (err: Error) => err instanceof ConfigError && err.message.includes('OTEL_EXPORTER_OTLP_ENDPOINT'), injected);
    }
    assert.equal(loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318/' }).observability.tracing?.tracesUrl, 'http://127.0.0.1:4318/v1/traces');
    assert.equal(loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otel.example.com/otlp' }).observability.tracing?.tracesUrl, 'https://otel.example.com/otlp/v1/traces');
  });

  it('finding 1: REDIS_URL options are refused at start-up, and what is accepted is typed', () => {
    for (const injected of ['redis://127.0.0.1:6379/?enableOfflineQueue=true', 'redis://127.0.0.1/?tls=true', 'redis://127.0.0.1/?sentinels=x', 'redis://127.0.0.1/not-a-db']) {
      assert.throws(() => loadConfig({ ...base, REDIS_URL: injected }), (err: Error) => err instanceof ConfigError && !err.message.includes('127.0.0.1'), injected);
    }
    assert.deepEqual(parseRedisUrl('rediss://u%40x:p%3Ass@cache.example.com:6380/2'), {
      host: 'cache.example.com',
      port: 6380,
      username: 'u@x',
      password: 'p:ss',
      db: 2,
      tls: true,
    });
  });

  it('finding 1: DATABASE_URL options other than sslmode and application_name are refused', () => {
    for (const injected of ['postgres://db.example.com/app?sslcert=/etc/shadow', 'postgres://db.example.com/app?options=-c%20statement_timeout%3D0', 'postgres://db.example.com/app?host=/tmp', 'postgres://db.example.com/app?sslmode=prefer']) {
      assert.throws(() => parsePostgresUrl(injected), /not supported/, injected);
    }
    assert.deepEqual(parsePostgresUrl('postgresql://app:s%2Fecret@db.example.com:6543/restock?sslmode=verify-full&application_name=restock-web'), {
      host: 'db.example.com',
      port: 6543,
      user: 'app',
      password: 's/ecret',
      database: 'restock',
      ssl: 'verify-full',
      applicationName: 'restock-web',
    });
  });

  it('finding 1: SMTP_URL keeps its short allow-list: a library option is refused', () => {
    for (const injected of ['smtp://mail.example.com/?sendmail=true&path=/bin/sh', 'smtp://mail.example.com/?pool=false', 'smtp://mail.example.com/?tls.rejectUnauthorized=false']) {
      assert.throws(() => openMailTransport({ smtpUrl: injected, from: 'a@example.com', database: undefined as never }), /not supported/, injected);
    }
  });
});
