/**
 * The OpenAPI document at /openapi.json: a valid OpenAPI 3.1 document, listing the operations
 * the API index lists, and generated from the same zod schemas that validate requests, so that
 * what it tells a client to send is what the service accepts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from './fixtures/suites.ts';
import { Validator } from '@seriousme/openapi-schema-validator';
import fc from 'fast-check';
import { z } from 'zod';
import { productIdSchema, variantIdSchema } from '../src/alerts/schemas.ts';
import { shopSchema } from '../src/stores/schemas.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { dialectSkip, registerAnonymous, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';

failOnLeakedHandles();

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };
type Schema = JsonObject;

interface Operation {
  operationId: string;
  method: string;
  path: string;
  summary: string;
}

function asObject(value: Json | undefined, what: string): JsonObject {
  assert.ok(value !== null && typeof value === 'object' && !Array.isArray(value), `${what} is not an object`);
  return value as JsonObject;
}

/** `/api/v1/alerts/:subscriptionId` -> `/api/v1/alerts/{subscriptionId}` */
function openApiPath(fastifyPath: string): string {
  return fastifyPath.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

/** Every operation in the document, as method (upper case), path and operationId. */
function documentOperations(doc: JsonObject): Array<{ method: string; path: string; operationId: string | undefined; operation: JsonObject }> {
  const out = [];
  for (const [path, item] of Object.entries(asObject(doc.paths, 'paths'))) {
    for (const method of HTTP_METHODS) {
      const operation = asObject(item, `paths[${path}]`)[method];
      if (operation === undefined) continue;
      const op = asObject(operation, `${method} ${path}`);
      out.push({ method: method.toUpperCase(), path, operationId: typeof op.operationId === 'string' ? op.operationId : undefined, operation: op });
    }
  }
  return out;
}

function resolveRef(doc: JsonObject, schema: Schema): Schema {
  let current = schema;
  for (let hops = 0; typeof current.$ref === 'string'; hops++) {
    assert.ok(hops < 20, 'circular $ref');
    const ref = current.$ref as string;
    assert.ok(ref.startsWith('#/'), `external $ref ${ref}`);
    let target: Json = doc;
    for (const part of ref.slice(2).split('/')) target = asObject(target, ref)[part.replace(/~1/g, '/').replace(/~0/g, '~')] ?? null;
    current = asObject(target, ref);
  }
  return current;
}

function requestBodySchema(doc: JsonObject, path: string, method: string): Schema {
  const operation = asObject(asObject(asObject(doc.paths, 'paths')[path], path)[method], `${method} ${path}`);
  const body = asObject(operation.requestBody, `${method} ${path} requestBody`);
  const content = asObject(body.content, `${method} ${path} requestBody.content`);
  const json = asObject(content['application/json'], `${method} ${path} application/json`);
  return resolveRef(doc, asObject(json.schema, `${method} ${path} schema`));
}

// ---------------------------------------------------------------------------------------------
// A small JSON Schema (2020-12) evaluator for the keywords the generated document uses. It
// refuses keywords it does not know, so it can never be silently more lenient than the document.
// ---------------------------------------------------------------------------------------------

const ANNOTATIONS = new Set(['description', 'title', 'examples', 'example', 'default', 'deprecated', 'readOnly', 'writeOnly', 'format', '$schema', 'id']);

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function matchesType(value: unknown, type: string): boolean {
  const actual = typeOf(value);
  return actual === type || (type === 'number' && actual === 'integer');
}

function schemaAccepts(doc: JsonObject, raw: Schema, value: unknown): boolean {
  const schema = resolveRef(doc, raw);
  for (const [keyword, rule] of Object.entries(schema)) {
    if (ANNOTATIONS.has(keyword) || keyword.startsWith('x-')) continue;
    switch (keyword) {
      case 'type': {
        const types = Array.isArray(rule) ? (rule as string[]) : [rule as string];
        if (!types.some((type) => matchesType(value, type))) return false;
        break;
      }
      case 'enum':
        if (!(rule as Json[]).some((option) => JSON.stringify(option) === JSON.stringify(value))) return false;
        break;
      case 'const':
        if (JSON.stringify(rule) !== JSON.stringify(value)) return false;
        break;
      case 'pattern':
        if (typeof value === 'string' && !new RegExp(rule as string, 'u').test(value)) return false;
        break;
      case 'minLength':
        if (typeof value === 'string' && [...value].length < (rule as number)) return false;
        break;
      case 'maxLength':
        if (typeof value === 'string' && [...value].length > (rule as number)) return false;
        break;
      case 'minimum':
        if (typeof value === 'number' && value < (rule as number)) return false;
        break;
      case 'maximum':
        if (typeof value === 'number' && value > (rule as number)) return false;
        break;
      case 'required':
        if (typeOf(value) === 'object' && !(rule as string[]).every((key) => Object.hasOwn(value as object, key))) return false;
        break;
      case 'properties':
        if (typeOf(value) === 'object') {
          for (const [key, sub] of Object.entries(rule as JsonObject)) {
            if (Object.hasOwn(value as object, key) && !schemaAccepts(doc, sub as Schema, (value as Record<string, unknown>)[key])) return false;
          }
        }
        break;
      case 'additionalProperties':
        if (typeOf(value) === 'object') {
          const known = new Set(Object.keys((schema.properties as JsonObject | undefined) ?? {}));
          for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
            if (known.has(key)) continue;
            if (rule === false || (typeof rule === 'object' && rule !== null && !schemaAccepts(doc, rule as Schema, item))) return false;
          }
        }
        break;
      case 'items':
        if (Array.isArray(value) && !value.every((item) => schemaAccepts(doc, rule as Schema, item))) return false;
        break;
      case 'anyOf':
        if (!(rule as Schema[]).some((sub) => schemaAccepts(doc, sub, value))) return false;
        break;
      case 'oneOf':
        if ((rule as Schema[]).filter((sub) => schemaAccepts(doc, sub, value)).length !== 1) return false;
        break;
      case 'allOf':
        if (!(rule as Schema[]).every((sub) => schemaAccepts(doc, sub, value))) return false;
        break;
      default:
        assert.fail(`the test's schema evaluator does not know the keyword "${keyword}"; extend it`);
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Inputs for comparing the document's verdict with the service's.
// ---------------------------------------------------------------------------------------------

const GOOD_EMAILS = ['shopper@example.com', 'Jane.Doe@Example.COM', 'a+tag@shop.example.org'];


/** Strings near the pattern a field must match, and some far from it. */
const nearPattern = (valid: fc.Arbitrary<string>) =>
  fc.oneof(
    { weight: 3, arbitrary: valid },
    {
      weight: 3,
      arbitrary: fc.tuple(valid, fc.constantFrom('prefix', 'suffix', 'upper', 'drop-last', 'nul', 'space')).map(([s, how]) => {
        switch (how) {
          case 'prefix':
            return ` ${s}`;
          case 'suffix':
            return `${s}x`;
          case 'upper':
            return s.toUpperCase();
          case 'drop-last':
            return s.slice(0, -1);
          case 'nul':
            return `${s}\u0000`;
          default:
            return `${s} `;
        }
      }),
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 40 }) },
    { weight: 1, arbitrary: fc.constantFrom('', 'gid://shopify/Product/', 'gid://shopify/Product/123456789012345678901', 'gid://shopify/ProductVariant/1') },
  );

const productIdArb = nearPattern(fc.stringMatching(/^gid:\/\/shopify\/Product\/[0-9]{1,20}$/));
const variantIdArb = nearPattern(fc.stringMatching(/^gid:\/\/shopify\/ProductVariant\/[0-9]{1,20}$/));
const shopArb = nearPattern(fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,62}\.myshopify\.com$/));

/** E-mail addresses good and bad: plain ones, RFC 5322 oddities, near misses, and too long ones. */
const emailArb = fc.oneof(
  { weight: 2, arbitrary: fc.constantFrom(...GOOD_EMAILS) },
  { weight: 2, arbitrary: fc.emailAddress() },
  { weight: 2, arbitrary: nearPattern(fc.stringMatching(/^[a-z][a-z0-9._+-]{0,15}@[a-z]{1,10}\.(com|org|io)$/)) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'not-an-email', 'a@', '@example.com', 'a@b', 'a@b.c', 'a..b@example.com', '.a@example.com', 'a.@example.com',
      'a@-example.com', 'a@example..com', 'a b@example.com', 'ünï@example.com', 'a@exämple.com', '"a"@example.com',
      `${'a'.repeat(64)}@${'b'.repeat(60)}.${'c'.repeat(60)}.${'d'.repeat(63)}.com`,
      `${'a'.repeat(64)}@${'b'.repeat(60)}.${'c'.repeat(60)}.${'d'.repeat(64)}.com`,
    ),
  },
);

/** A field value of any JSON type, mostly the string kind. */
const fieldOf = (strings: fc.Arbitrary<string>) =>
  fc.oneof({ weight: 8, arbitrary: strings }, { weight: 1, arbitrary: fc.constantFrom<Json>(null, 7, true, [], {}) });

for (const dialect of testDialects()) {
  describe(`the OpenAPI document on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let doc: JsonObject;

    before(async () => {
      t = await startTestApp(dialect);
      const res = await t.inject({ method: 'GET', url: '/openapi.json' });
      assert.equal(res.statusCode, 200);
      assert.match(res.headers['content-type'] as string, /^application\/json/);
      doc = res.json();
    });
    after(() => t.close());

    it('is a valid OpenAPI 3.1 document', async () => {
      const validator = new Validator();
      const result = await validator.validate(structuredClone(doc) as Record<string, unknown>);
      assert.ok(result.valid, `not a valid OpenAPI document: ${JSON.stringify(result.errors, null, 2)}`);
      assert.equal(validator.version, '3.1');

      // The validator is not vacuous: a broken copy of the same document fails.
      const broken = structuredClone(doc) as Record<string, unknown> & { paths: Record<string, unknown> };
      broken.paths['/broken'] = { get: { operationId: 'broken', responses: 'none' } };
      assert.equal((await new Validator().validate(broken)).valid, false, 'a broken document passed validation');
    });

    it('is OpenAPI 3.1.0 of API version 1.0.0, served from the configured base URL', () => {
      assert.equal(doc.openapi, '3.1.0');
      assert.equal(asObject(doc.info, 'info').version, '1.0.0');
      assert.deepEqual(doc.servers, [{ url: t.config.baseUrl }]);
    });

    it('names the service categories', () => {
      const categories = asObject(doc['x-service-info'], 'x-service-info').categories;
      assert.ok(Array.isArray(categories));
      for (const category of ['e-commerce', 'notifications', 'inventory']) assert.ok(categories.includes(category), category);
    });

    it('has subscribeAlert, checkoutPlan and getHealth at their paths and methods', () => {
      const expected = [
        ['subscribeAlert', 'POST', '/api/v1/alerts/subscribe'],
        ['checkoutPlan', 'POST', '/api/v1/plans/checkout'],
        ['getHealth', 'GET', '/api/health'],
      ];
      const operations = documentOperations(doc);
      for (const [operationId, method, path] of expected) {
        const found = operations.filter((op) => op.operationId === operationId);
        assert.equal(found.length, 1, `${operationId} appears ${found.length} times`);
        assert.equal(found[0]!.method, method, operationId);
        assert.equal(found[0]!.path, path, operationId);
      }
    });

    it('has a unique operationId on every operation, and declares every path parameter', () => {
      const operations = documentOperations(doc);
      const ids = operations.map((op) => op.operationId);
      assert.ok(ids.every((id) => typeof id === 'string' && id.length > 0), JSON.stringify(ids));
      assert.equal(new Set(ids).size, ids.length, `duplicate operationIds: ${JSON.stringify(ids)}`);
      for (const { method, path, operation } of operations) {
        const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
        const declared = ((operation.parameters as JsonObject[] | undefined) ?? [])
          .map((p) => resolveRef(doc, p))
          .filter((p) => p.in === 'path');
        assert.deepEqual(declared.map((p) => p.name).sort(), [...templated].sort(), `${method} ${path} path parameters`);
        for (const p of declared) assert.equal(p.required, true, `${method} ${path} ${p.name} must be required`);
      }
    });

    it('declares error answers as application/problem+json, as the service sends them', async () => {
      for (const { method, path, operation } of documentOperations(doc)) {
        for (const [status, response] of Object.entries(asObject(operation.responses, `${method} ${path} responses`))) {
          const content = asObject(response, `${method} ${path} ${status}`).content;
          if (Number(status) < 400 || content === undefined) continue;
          assert.deepEqual(Object.keys(asObject(content, 'content')), ['application/problem+json'], `${method} ${path} ${status}`);
        }
      }
      const res = await t.post('/api/v1/alerts/subscribe', {});
      assert.equal(res.statusCode, 400);
      assert.match(res.headers['content-type'] as string, /^application\/problem\+json/);
    });

    it('writes the scope each operation needs into its security, and the service enforces exactly that', async () => {
      const schemes = asObject(asObject(doc.components, 'components').securitySchemes, 'securitySchemes');
      assert.deepEqual(asObject(schemes.agentToken, 'agentToken').scheme, 'bearer');
      const readOnly = await registerAnonymous(t.app, { scope: 'api:read' });
      const samples: Record<string, string> = { subscriptionId: 'sub_x', sessionId: 'cs_x', domain: 'a.myshopify.com', agentId: 'agt_x' };
      let scoped = 0;
      for (const { method, path, operation } of documentOperations(doc)) {
        const url = path.replace(/\{([^}]+)\}/g, (_, name: string) => samples[name] ?? 'x');
        const security = operation.security as Array<Record<string, string[]>> | undefined;
        // Public says so (`security: []`): an operation without it would read as "not stated".
        assert.ok(Array.isArray(security), `${method} ${path} states no security`);
        const anonymous = await t.app.inject({ method: method as 'GET', url });
        if (security.length === 0) {
          assert.notEqual(anonymous.statusCode, 401, `${method} ${path} is public but answered 401`);
          continue;
        }
        scoped++;
        const [scope] = security[0]!.agentToken!;
        assert.ok(scope, `${method} ${path} names no scope`);
        assert.ok(asObject(operation.responses, 'responses')['401'], `${method} ${path} documents no 401`);
        if (operation['x-payment-info']) {
          // Paid per request without a token: the 402 says how (docs/payments.md).
          assert.equal(anonymous.statusCode, 402, `${method} ${path} without a token`);
          assert.ok(asObject(operation.responses, 'responses')['402'], `${method} ${path} documents no 402`);
        } else {
          assert.equal(anonymous.statusCode, 401, `${method} ${path} without a token`);
          assert.match(anonymous.headers['www-authenticate'] as string, /^Bearer .*resource_metadata="http:\/\/restock\.test\/\.well-known\/oauth-protected-resource"/);
        }
        const withReadOnly = await t.app.inject({ method: method as 'GET', url, headers: { authorization: `Bearer ${readOnly}` } });
        if (scope === 'api:read') {
          assert.ok(![401, 403].includes(withReadOnly.statusCode), `${method} ${path} refused an api:read token: ${withReadOnly.body}`);
        } else {
          assert.equal(withReadOnly.statusCode, 403, `${method} ${path} with only api:read`);
          assert.match(withReadOnly.headers['www-authenticate'] as string, new RegExp(`error="insufficient_scope".*scope="${scope}"`));
        }
      }
      assert.ok(scoped >= 8, `only ${scoped} operations need a token`);
    });

    it('lists every operation of the API index, with the same method and path, and nothing else', async () => {
      const res = await t.inject({ method: 'GET', url: '/api' });
      assert.equal(res.statusCode, 200);
      const index = res.json() as { openapi: string; operations: Operation[] };
      assert.equal(index.openapi, `${t.config.baseUrl}/openapi.json`);
      assert.ok(index.operations.length > 0);
      const documented = documentOperations(doc);
      for (const op of index.operations) {
        const path = openApiPath(op.path);
        const found = documented.find((d) => d.method === op.method.toUpperCase() && d.path === path);
        assert.ok(found, `${op.method} ${op.path} (${op.operationId}) is in the API index but not in the document`);
        assert.equal(found.operationId, op.operationId, `${op.method} ${path}`);
      }
      for (const d of documented) {
        const listed = index.operations.some((op) => op.method.toUpperCase() === d.method && openApiPath(op.path) === d.path);
        assert.ok(listed, `${d.method} ${d.path} (${d.operationId}) is in the document but not in the API index`);
      }
    });

    describe('is generated from the zod schemas that validate requests', () => {
      it('gives subscribeAlert a body that requires productId and email and carries the productId pattern', () => {
        const schema = requestBodySchema(doc, '/api/v1/alerts/subscribe', 'post');
        assert.equal(schema.type, 'object');
        const required = schema.required as string[];
        assert.ok(required.includes('productId') && required.includes('email'), JSON.stringify(required));
        assert.ok(!required.includes('variantId'), 'variantId is optional');
        const properties = asObject(schema.properties, 'properties');
        const productId = asObject(properties.productId, 'productId');
        assert.equal(productId.type, 'string');
        assert.equal(productId.pattern, (z.toJSONSchema(productIdSchema, { io: 'input' }) as { pattern?: string }).pattern);
        const variantId = asObject(properties.variantId, 'variantId');
        const variantPatterns = ((variantId.anyOf as Schema[] | undefined) ?? [variantId]).map((s) => s.pattern).filter(Boolean);
        assert.deepEqual(variantPatterns, [(z.toJSONSchema(variantIdSchema, { io: 'input' }) as { pattern?: string }).pattern]);
        assert.equal(asObject(properties.email, 'email').maxLength, 254);
      });

      it("uses a productId pattern that decides exactly as the service's validator does", () => {
        const pattern = new RegExp(asObject(asObject(requestBodySchema(doc, '/api/v1/alerts/subscribe', 'post').properties, 'p').productId, 'productId').pattern as string, 'u');
        fc.assert(
          fc.property(productIdArb, (value) => {
            assert.equal(pattern.test(value), productIdSchema.safeParse(value).success, JSON.stringify(value));
          }),
          { numRuns: 300 },
        );
      });

      it('gives checkoutPlan a body that requires plan and shop, with the plan enum and the shop pattern', () => {
        const schema = requestBodySchema(doc, '/api/v1/plans/checkout', 'post');
        assert.deepEqual([...(schema.required as string[])].sort(), ['plan', 'shop']);
        const properties = asObject(schema.properties, 'properties');
        assert.deepEqual(asObject(properties.plan, 'plan').enum, ['starter', 'growth']);
        assert.equal(asObject(properties.shop, 'shop').pattern, (z.toJSONSchema(shopSchema, { io: 'input' }) as { pattern?: string }).pattern);
      });

      it('rejects with 400 an example body the document rejects, and accepts with 200 one it accepts', async () => {
        const schema = requestBodySchema(doc, '/api/v1/alerts/subscribe', 'post');
        const bad = { productId: 'gid://shopify/Product/abc', email: 'shopper@example.com' };
        const good = { productId: 'gid://shopify/Product/123', variantId: 'gid://shopify/ProductVariant/456', email: 'shopper@example.com' };
        const missing = { productId: 'gid://shopify/Product/123' };
        const badEmail = { productId: 'gid://shopify/Product/123', email: 'not-an-email' };
        assert.equal(schemaAccepts(doc, schema, badEmail), false, 'the document rejects a bad e-mail');
        assert.equal((await t.post('/api/v1/alerts/subscribe', badEmail)).statusCode, 400);
        assert.equal(schemaAccepts(doc, schema, bad), false, 'the document rejects a bad productId');
        assert.equal(schemaAccepts(doc, schema, missing), false, 'the document rejects a missing email');
        assert.equal(schemaAccepts(doc, schema, good), true, 'the document accepts a good body');

        const before = await t.tableDigests();
        const rejected = await t.post('/api/v1/alerts/subscribe', bad);
        assert.equal(rejected.statusCode, 400, rejected.body);
        assert.ok(rejected.json().errors.some((e: { pointer: string }) => e.pointer === '/body/productId'), rejected.body);
        const rejectedMissing = await t.post('/api/v1/alerts/subscribe', missing);
        assert.equal(rejectedMissing.statusCode, 400, rejectedMissing.body);
        assert.ok(rejectedMissing.json().errors.some((e: { pointer: string }) => e.pointer === '/body/email'), rejectedMissing.body);
        assert.deepEqual(await t.tableDigests(), before);

        const accepted = await t.post('/api/v1/alerts/subscribe', good);
        assert.equal(accepted.statusCode, 200, accepted.body);
        assert.equal(accepted.json().status, 'active');

        const checkout = requestBodySchema(doc, '/api/v1/plans/checkout', 'post');
        const badPlan = { plan: 'platinum', shop: 'my-store.myshopify.com' };
        const goodPlan = { plan: 'growth', shop: 'my-store.myshopify.com' };
        assert.equal(schemaAccepts(doc, checkout, badPlan), false);
        assert.equal(schemaAccepts(doc, checkout, goodPlan), true);
        assert.equal((await t.post('/api/v1/plans/checkout', badPlan)).statusCode, 400);
        assert.equal((await t.post('/api/v1/plans/checkout', goodPlan)).statusCode, 200);
      });

      it('describes exactly the subscribeAlert bodies the service accepts', async () => {
        const schema = requestBodySchema(doc, '/api/v1/alerts/subscribe', 'post');
        const bodyArb = fc.record(
          {
            productId: fieldOf(productIdArb),
            variantId: fc.oneof(fieldOf(variantIdArb), fc.constant(null)),
            email: fieldOf(emailArb),
          },
          { requiredKeys: [] },
        );
        await fc.assert(
          fc.asyncProperty(bodyArb, async (body) => {
            const inDocument = schemaAccepts(doc, schema, body);
            const res = await t.post('/api/v1/alerts/subscribe', body);
            assert.equal(res.statusCode, inDocument ? 200 : 400, `${JSON.stringify(body)} -> ${res.statusCode} ${res.body.slice(0, 300)}`);
          }),
          { numRuns: 200 },
        );
      });

      it('describes exactly the checkoutPlan bodies the service accepts', async () => {
        const schema = requestBodySchema(doc, '/api/v1/plans/checkout', 'post');
        const bodyArb = fc.record(
          { plan: fieldOf(fc.oneof(fc.constantFrom('starter', 'growth'), nearPattern(fc.constantFrom('starter', 'growth')))), shop: fieldOf(shopArb) },
          { requiredKeys: [] },
        );
        await fc.assert(
          fc.asyncProperty(bodyArb, async (body) => {
            const inDocument = schemaAccepts(doc, schema, body);
            const res = await t.post('/api/v1/plans/checkout', body);
            assert.equal(res.statusCode, inDocument ? 200 : 400, `${JSON.stringify(body)} -> ${res.statusCode} ${res.body.slice(0, 300)}`);
          }),
          { numRuns: 150 },
        );
      });
    });
  });
}
