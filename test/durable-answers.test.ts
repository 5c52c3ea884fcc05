import assert from 'node:assert/strict';
import http from 'node:http';
import Fastify from 'fastify';
import { describe, it } from './fixtures/suites.ts';
import { answersAfterDurable, rawAnswerAfterDurable } from '../src/core/http/durable-answers.ts';
import { freePort } from './fixtures/network.ts';

/** A flush the test lets go of when it chooses. */
function pendingFlush() {
  let release = () => {};
  const flushed = new Promise<void>((resolve) => (release = resolve));
  let pending = true;
  void flushed.then(() => (pending = false));
  return { durable: () => (pending ? flushed : undefined), release };
}

const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
};

describe('answers wait for what they may describe to be on disk', () => {
  it('a route answer leaves only once the flush under way is done; with none under way, at once', async () => {
    const flush = pendingFlush();
    const app = Fastify();
    answersAfterDurable(app, flush.durable);
    app.get('/', async () => ({ ok: true }));
    await app.ready();
    try {
      let answered = false;
      const answer = app.inject({ method: 'GET', url: '/' }).then((response) => {
        answered = true;
        return response;
      });
      await turns(20);
      assert.equal(answered, false, 'held while the flush runs');
      flush.release();
      assert.equal((await answer).statusCode, 200);
      assert.equal((await app.inject({ method: 'GET', url: '/' })).json().ok, true, 'nothing under way: answered at once');
    } finally {
      await app.close();
    }
  });

  it('an answer a library writes to the socket itself keeps its order and waits the same', async () => {
    const flush = pendingFlush();
    const server = http.createServer((_request, response) => {
      rawAnswerAfterDurable(response, flush.durable);
      response.writeHead(200, { 'content-type': 'text/plain' });
      response.write('one ');
      response.write('two ');
      response.end('three');
    });
    const port = await freePort();
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    try {
      let body = '';
      let ended = false;
      const done = new Promise<void>((resolve, reject) => {
        http
          .get({ host: '127.0.0.1', port, path: '/' }, (response) => {
            response.setEncoding('utf8');
            response.on('data', (chunk: string) => (body += chunk));
            response.on('end', () => {
              ended = true;
              resolve();
            });
          })
          .on('error', reject);
      });
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(ended, false, 'held while the flush runs');
      assert.equal(body, '');
      flush.release();
      await done;
      assert.equal(body, 'one two three');
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
