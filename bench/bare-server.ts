/**
 * The baseline for bench/subscribe.ts: a bare Fastify 5 server with one route returning a
 * constant JSON object, no logger, no plugins. Whatever this reaches on a machine is the ceiling
 * of "Node + Fastify + HTTP/1.1 keep-alive" there, so Restock is measured as a fraction of it.
 *
 *   PORT=3001 node --import tsx bench/bare-server.ts
 */
import Fastify from 'fastify';

const port = Number(process.env.PORT ?? 3001);
const host = process.env.HOST ?? '127.0.0.1';

const app = Fastify({ logger: false });
const answer = { status: 'ok', service: 'bare' };
app.get('/', async () => answer);

await app.listen({ port, host });

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}
