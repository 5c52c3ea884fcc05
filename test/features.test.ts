import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import Fastify from 'fastify';
import fp from 'fastify-plugin';
import { bearerGate, identityGate } from '../src/agents/gate.ts';
import type { AgentService } from '../src/agents/service.ts';
import type { Database } from '../src/core/db/database.ts';
import { inDependencyOrder } from '../src/core/feature.ts';
import { idempotencyGate } from '../src/core/http/idempotency.ts';
import { describe, it } from './fixtures/suites.ts';

const SRC = path.resolve(import.meta.dirname, '../src');
const read = (file: string) => readFileSync(path.join(SRC, file), 'utf8');
/** The folders of src/ that are features (everything but the shared core). */
const FEATURES = readdirSync(SRC, { withFileTypes: true }).filter((entry) => entry.isDirectory() && entry.name !== 'core').map((entry) => entry.name);

const named = (name: string, dependencies: string[] = []) => fp(async () => {}, { name, dependencies });
const nameOf = (plugin: object) => (plugin as Record<symbol, { name: string }>)[Symbol.for('plugin-meta')]!.name;

describe('assembling the app from features', () => {
  it('orders the gates so that each follows those it names, otherwise keeping the given order', () => {
    const plugins = [
      named('payment-gate', ['identity-gate', 'idempotency-gate']),
      named('api-cors'),
      named('idempotency-gate', ['identity-gate']),
      named('identity-gate'),
      named('rate-limit-gate', ['identity-gate']),
    ];
    assert.deepEqual(inDependencyOrder(plugins).map(nameOf), ['identity-gate', 'idempotency-gate', 'payment-gate', 'api-cors', 'rate-limit-gate']);
  });

  it('refuses gates that name one no feature provides, or that name each other in a cycle', () => {
    assert.throws(() => inDependencyOrder([named('payment-gate', ['identity-gate'])]), /payment-gate needs identity-gate, which no feature provides/);
    assert.throws(() => inDependencyOrder([named('a', ['b']), named('b', ['a'])]), /cycle/);
  });

  it('has Fastify refuse a gate registered before a gate it depends on, at start-up', async () => {
    const idempotency = idempotencyGate({ database: {} as Database, ttlHours: 24 });
    const early = Fastify({ logger: false });
    early.register(idempotency);
    await assert.rejects(async () => early.ready(), /identity-gate/);
    await early.close();

    const inOrder = Fastify({ logger: false });
    inOrder.register(identityGate(bearerGate({} as AgentService, 'https://restock.test/.well-known/oauth-protected-resource')));
    inOrder.register(idempotency);
    await inOrder.ready();
    await inOrder.close();
  });

  it('keeps feature construction out of app.ts and main.ts: a feature is reached only through its feature.ts', () => {
    for (const file of ['app.ts', 'main.ts']) {
      const valueImports = [...read(file).matchAll(/^import (?!type )[^;]*? from '\.\/([^']+)';$/gms)].map(([, target]) => target!);
      for (const target of valueImports) {
        const [folder, ...rest] = target.split('/');
        if (!FEATURES.includes(folder!)) continue;
        assert.equal(rest.join('/'), 'feature.ts', `src/${file} imports src/${target}: build it in src/${folder}/feature.ts instead`);
      }
    }
  });

  it('says at the top of every file under src/ over 350 lines why it is that long', () => {
    const walk = (dir: string): string[] =>
      readdirSync(path.join(SRC, dir), { withFileTypes: true }).flatMap((entry) => {
        const file = path.join(dir, entry.name);
        return entry.isDirectory() ? walk(file) : file.endsWith('.ts') ? [file] : [];
      });
    const long = walk('.').filter((file) => read(file).split('\n').length > 350);
    assert.ok(long.length > 0, 'the walk found the long files');
    for (const file of long) assert.match(read(file), /^\/\/ Longer than most files on purpose: /, `src/${file} is over 350 lines and does not say why`);
  });
});
