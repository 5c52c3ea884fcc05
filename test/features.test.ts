import assert from 'node:assert/strict';
import Fastify from 'fastify';
import fp from 'fastify-plugin';
import { bearerGate, identityGate } from '../src/agents/gate.ts';
import type { AgentService } from '../src/agents/service.ts';
import type { Database } from '../src/core/db/database.ts';
import { inDependencyOrder } from '../src/core/feature.ts';
import { idempotencyGate } from '../src/core/http/idempotency.ts';
import { describe, it } from './fixtures/suites.ts';

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
});
