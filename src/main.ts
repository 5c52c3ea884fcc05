import pino from 'pino';
import { ConfigError, loadConfig, type Config } from './config.ts';
import { Database } from './core/db/database.ts';
import { openMailTransport } from './core/mail/transport.ts';
import { ValidationFailed } from './core/problems.ts';
import { LocalChangeBus } from './core/changes/bus.ts';
import { openChangeBus } from './core/changes/open.ts';

// Each command loads only the features it runs (dynamic imports below): `restock worker` and the
// one-off commands leave out the web's features and their libraries (the MCP SDK among them).

const USAGE = `Restock: back-in-stock alerts for e-commerce stores.

Usage: restock <command>

Commands:
  serve      Start the HTTP service (applies pending migrations first) with the dispatch
             worker inside, unless RUN_WORKER=false
  worker     Run only the dispatch worker: detects restocks from queued webhooks, plans
             batches and sends alerts. Run any number beside \`serve\` (PostgreSQL).
  migrate    Apply pending database migrations and exit
  store create <domain> --owner <email> [--platform <name>]
             Create a store (or change its owner). Agents its owner claims naming the
             store are bound to it. The platform (shopify, woocommerce, bigcommerce, ...)
             is needed unless the domain tells it (*.myshopify.com, *.mybigcommerce.com).
  dashboard link <domain>
             Print a one-time link that signs the store's owner in to the dashboard
             (for the operator of an embedded install, whose mail stays in the outbox).
  wallet show | export | import
             The wallet test-network payments are paid to (PAYMENTS_TEST_NETWORK): its
             address (show), its private key (export, to standard output), or a private
             key read from standard input put in its place (import).
  keys rotate [--http-signatures]
             Make a new access-token signing key; older keys keep verifying the tokens
             they signed until those expire. With --http-signatures, a new key for the
             signatures on outgoing deliveries instead; the former one stays in the key
             directory for a week.
  help       Show this help

Configuration comes from environment variables; see README.md or .env.example.
With none set, Restock runs embedded: SQLite under ./data, e-mails kept in a local outbox.
`;

async function serve(): Promise<void> {
  const { startServer } = await import('./server.ts');
  const server = await startServer(loadConfig());
  const log = server.app.log;
  // Before the line that says it is up: whoever reads it may signal at once, and a signal with no handler yet kills the process outright.
  stopOnSignal(log, 'shutting down', () => server.stop());
  log.info({ url: server.url, tlsUrl: server.tlsUrl, database: server.database.dialect }, 'Restock is listening');
}

/** The dispatch worker alone: what `serve` runs inside it, for scaling sending apart from the API. */
async function worker(): Promise<void> {
  const config = loadConfig();
  const log = pino({ level: config.logLevel });
  const database = Database.open(config.database);
  await database.migrate();
  const mail = openMailTransport({ smtpUrl: config.smtpUrl, from: config.mailFrom, database, poolSize: config.dispatch.smtpPoolSize, ca: config.smtpCa });
  const { buildDomainFeatures } = await import('./domain.ts');
  const { domain, features, changes } = await buildDomainFeatures(config, database, mail, log);
  domain.worker.start();
  // Before the line that says it runs, as for `serve`.
  stopOnSignal(log, 'worker stopping after the alerts in flight', async () => {
    for (const feature of features.reverse()) await feature.close?.();
    await changes.close();
    await mail.close();
    await database.close();
  });
  log.info({ worker: domain.worker.id, database: database.dialect, mail: mail.kind }, 'Restock worker is running');
}

/**
 * SIGTERM or SIGINT stops the process once `stop` has finished. The listeners stay (`on`, not
 * `once`): a repeated signal must not kill the process before in-flight work ends.
 */
function stopOnSignal(log: Pick<pino.Logger, 'info' | 'error'>, message: string, stop: () => Promise<void>): void {
  let stopping = false;
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      log.info({ signal }, message);
      stop().then(
        () => process.exit(0),
        (err) => {
          log.error({ err }, 'shutdown failed');
          process.exit(1);
        },
      );
    });
  }
}

async function migrate(): Promise<void> {
  const database = Database.open(loadConfig().database);
  try {
    const applied = await database.migrate();
    console.log(applied.length ? `Applied: ${applied.join(', ')}` : 'Database is up to date.');
  } finally {
    await database.close();
  }
}

/** Runs `work` against the migrated database, then closes it. */
async function withDatabase<T>(config: Config, work: (database: Database) => Promise<T>): Promise<T> {
  const database = Database.open(config.database);
  try {
    await database.migrate();
    return await work(database);
  } finally {
    await database.close();
  }
}

async function storeCommand(args: string[]): Promise<number> {
  const [sub, domain, ...rest] = args;
  const option = (name: string) => (rest.includes(name) ? rest[rest.indexOf(name) + 1] : undefined);
  const owner = option('--owner');
  const platform = option('--platform');
  if (sub !== 'create' || !domain || !owner || (rest.includes('--platform') && !platform)) {
    process.stderr.write('Usage: restock store create <domain> --owner <email> [--platform <name>]\n');
    return 2;
  }
  const config = loadConfig();
  try {
    const { store, ended } = await withDatabase(config, (database) => transferStore(config, database, domain, owner, platform));
    console.log(`Store ${store.domain} is owned by ${store.ownerEmail}.`);
    for (const line of ended) console.log(`${line}.`);
    return 0;
  } catch (err) {
    if (!(err instanceof ValidationFailed)) throw err;
    process.stderr.write(`restock: ${err.detail.replace('/domain', 'domain').replace('/owner', '--owner').replace('/platform', '--platform')}\n`);
    return 2;
  }
}

/** A store changes hands; running processes hear it (their former owners' agents lose it at once). */
async function transferStore(config: Config, database: Database, domain: string, owner: string, platform: string | undefined) {
  const { formerOwnerAccess } = await import('./domain.ts');
  const { storeService } = await import('./stores/feature.ts');
  const { STORE_DOMAINS } = await import('./platforms.ts');
  const changes = openChangeBus(config.redisUrl, database, pino({ level: 'warn' }));
  try {
    if (!(await changes.whenLive(5000))) {
      process.stderr.write('restock: could not reach the channel running processes listen on; restart them to be sure the former owner\'s agents lose the store.\n');
    }
    return await storeService(config, database, changes, STORE_DOMAINS, formerOwnerAccess(database, changes)).transferStore(domain, owner, platform);
  } finally {
    await changes.close();
  }
}

async function dashboardCommand(args: string[]): Promise<number> {
  const [sub, domain] = args;
  if (sub !== 'link' || !domain) {
    process.stderr.write('Usage: restock dashboard link <domain>\n');
    return 2;
  }
  const config = loadConfig();
  const { dashboardSignIn } = await import('./dashboard/feature.ts');
  const { storeService } = await import('./stores/feature.ts');
  const { STORE_DOMAINS } = await import('./platforms.ts');
  const issued = await withDatabase(config, async (database) => {
    const mail = openMailTransport({ smtpUrl: config.smtpUrl, from: config.mailFrom, database, poolSize: 1, ca: config.smtpCa });
    try {
      return await dashboardSignIn({ config, database, mail, stores: storeService(config, database, new LocalChangeBus(), STORE_DOMAINS) }).issueLink(domain);
    } finally {
      await mail.close();
    }
  });
  if (!issued) {
    process.stderr.write(`restock: no active store ${domain}; create it with \`restock store create\`.\n`);
    return 1;
  }
  console.log(`Sign-in link for ${issued.shop} (works once, for ${config.dashboard.signInLinkTtlMinutes} minutes):\n${issued.link}`);
  return 0;
}

async function keysCommand(args: string[]): Promise<number> {
  const httpSignatures = args[1] === '--http-signatures';
  if (args[0] !== 'rotate' || args.length > (httpSignatures ? 2 : 1)) {
    process.stderr.write('Usage: restock keys rotate [--http-signatures]\n');
    return 2;
  }
  const config = loadConfig();
  if (httpSignatures) {
    const { rotateMessageSigningKey } = await import('./webhooks/feature.ts');
    const keyid = await withDatabase(config, (database) => rotateMessageSigningKey(config, database));
    console.log(`New HTTP message signing key ${keyid}. Running processes sign with it within a minute.`);
    return 0;
  }
  const { rotateSigningKey } = await import('./agents/feature.ts');
  const kid = await withDatabase(config, (database) => rotateSigningKey(config, database));
  console.log(`New signing key ${kid}. Running processes pick it up within a minute.`);
  return 0;
}

async function walletCommand(args: string[]): Promise<number> {
  const [sub] = args;
  if (sub !== 'show' && sub !== 'export' && sub !== 'import') {
    process.stderr.write('Usage: restock wallet show | export | import (the private key on standard input)\n');
    return 2;
  }
  const config = loadConfig();
  const { importPaymentWallet, loadPaymentWallet } = await import('./payments/wallet.ts');
  const { SecretBox } = await import('./core/sealed-secrets.ts');
  const secrets = SecretBox.fromKey(config.encryptionKey);
  if (sub === 'import') {
    const typed = await readStandardInput();
    try {
      const wallet = await withDatabase(config, (database) => importPaymentWallet(database, secrets, typed));
      console.log(`Test-network payments now go to ${wallet.address}. Restart running processes to offer it.`);
      return 0;
    } catch (err) {
      process.stderr.write(`restock: ${(err as Error).message}\n`);
      return 2;
    }
  }
  const wallet = await withDatabase(config, (database) => loadPaymentWallet(database, secrets));
  if (sub === 'export') {
    console.log(wallet.privateKey);
    return 0;
  }
  const network = config.payments.testNetwork;
  console.log(`Address: ${wallet.address}`);
  console.log(
    network
      ? `Test-network payments are on: x402 on ${network.x402.network} (asset ${network.x402.asset}), MPP tempo on Tempo's testnet.`
      : 'Test-network payments are off on this configuration (PAYMENTS_TEST_NETWORK, X402_PAY_TO): nothing is offered to this address.',
  );
  return 0;
}

async function readStandardInput(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function main(argv: string[]): Promise<number> {
  const [command, ...args] = argv;
  switch (command) {
    case 'store':
      return storeCommand(args);
    case 'keys':
      return keysCommand(args);
    case 'wallet':
      return walletCommand(args);
    case 'dashboard':
      return dashboardCommand(args);
    case 'serve':
      await serve();
      return 0;
    case 'worker':
      await worker();
      return 0;
    case 'migrate':
      await migrate();
      return 0;
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(USAGE);
      return 0;
    default:
      process.stderr.write(`Unknown command: ${command}\n\n${USAGE}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== 0) process.exitCode = code;
  },
  (err) => {
    if (err instanceof ConfigError) process.stderr.write(`${err.message}\n`);
    else process.stderr.write(`restock: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
