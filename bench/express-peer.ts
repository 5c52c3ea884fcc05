/**
 * The naive peer for bench/subscribe.ts: what a subscribe endpoint looks like written the plain
 * way, with Express 5 and better-sqlite3. No authentication, no validation beyond "is there an
 * e-mail", one INSERT per request in its own durable transaction (WAL, synchronous=FULL, as
 * Restock's embedded default), the new row's id answered with 201. Restock's authenticated
 * subscribe is measured against it in the same run.
 *
 *   PORT=3002 DATA_DIR=/tmp/x node --import tsx bench/express-peer.ts
 */
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import SqliteDriver from 'better-sqlite3';
import express from 'express';

const port = Number(process.env.PORT ?? 3002);
const host = process.env.HOST ?? '127.0.0.1';
const db = new SqliteDriver(path.join(process.env.DATA_DIR ?? '.', 'peer.db'));
db.pragma('journal_mode = WAL');
db.pragma('synchronous = FULL');
db.exec('create table if not exists subscriptions (id text primary key, product_id text, variant_id text, email text, created_at text)');
const insert = db.prepare('insert into subscriptions (id, product_id, variant_id, email, created_at) values (?, ?, ?, ?, ?)');

const app = express();
app.use(express.json());
app.get('/', (_request, response) => {
  response.json({ status: 'ok' });
});
app.post('/api/v1/alerts/subscribe', (request, response) => {
  const { productId, variantId, email } = (request.body ?? {}) as Record<string, unknown>;
  if (typeof email !== 'string') {
    response.status(400).json({ error: 'email required' });
    return;
  }
  const id = randomUUID();
  insert.run(id, String(productId), String(variantId ?? ''), email, new Date().toISOString());
  response.status(201).json({ subscriptionId: id, status: 'active' });
});

const server = app.listen(port, host);

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    server.close(() => {
      db.close();
      process.exit(0);
    });
  });
}
