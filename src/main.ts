import { ConfigError, loadConfig } from './config.ts';
import { Database } from './core/db/database.ts';
import { startServer } from './server.ts';

const USAGE = `Restock: back-in-stock alerts for e-commerce stores.

Usage: restock <command>

Commands:
  serve      Start the HTTP service (applies pending migrations first)
  migrate    Apply pending database migrations and exit
  help       Show this help

Configuration comes from environment variables; see README.md or .env.example.
With none set, Restock runs embedded: SQLite under ./data, e-mails kept in a local outbox.
`;

async function serve(): Promise<void> {
  const server = await startServer(loadConfig());
  server.app.log.info({ url: server.url, database: server.database.dialect }, 'Restock is listening');
  let stopping = false;
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    // `on`, not `once`: the listener must stay, or a repeated signal would kill the process
    // before in-flight requests finish.
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      server.app.log.info({ signal }, 'shutting down');
      server.stop().then(
        () => process.exit(0),
        (err) => {
          server.app.log.error({ err }, 'shutdown failed');
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

async function main(argv: string[]): Promise<number> {
  const [command] = argv;
  switch (command) {
    case 'serve':
      await serve();
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
