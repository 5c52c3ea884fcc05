import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import diagnostics from 'node:diagnostics_channel';
import http, { type IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { after, before, describe, it } from './fixtures/suites.ts';
import { decodeJwt } from 'jose';
import { ID_JAG_TOKEN_TYPE } from '../src/agents/identity-assertions.ts';
import { JWT_BEARER_GRANT } from '../src/agents/metadata.ts';
import { ConfigError } from '../src/config.ts';
import { startServer, type RunningServer } from '../src/server.ts';
import { createTestDatabase, dialectSkip, testConfig, testDialects, type TestDatabase } from './fixtures/app.ts';
import { makeCertificates, type KeyPair } from './fixtures/certificates.ts';
import { startIdentityProvider, type TestIdentityProvider } from './fixtures/identity-provider.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { eventually, refusesConnections } from './fixtures/network.ts';

failOnLeakedHandles();

const BASE_URL = 'http://restock.test';
const certs = makeCertificates();
after(() => certs.remove());

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  json(): any;
}

interface CallOptions {
  method?: string;
  json?: unknown;
  form?: Record<string, string>;
  token?: string;
  /** The client certificate to present; none when unset. */
  client?: KeyPair;
  /** For connection reuse; by default every call has a connection of its own. */
  agent?: https.Agent;
}

/** One request to either listener, over a real socket: the transport is what these tests are about. */
function call(base: string, path: string, options: CallOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  let payload: string | undefined;
  if (options.json !== undefined) {
    payload = JSON.stringify(options.json);
    headers['content-type'] = 'application/json';
  } else if (options.form) {
    payload = new URLSearchParams(options.form).toString();
    headers['content-type'] = 'application/x-www-form-urlencoded';
  }
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  const url = new URL(path, base);
  const method = options.method ?? (payload === undefined ? 'GET' : 'POST');
  return new Promise((resolve, reject) => {
    const onResponse = (res: http.IncomingMessage) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body, json: () => JSON.parse(body) }));
      res.on('error', reject);
    };
    const req =
      url.protocol === 'https:'
        ? https.request(url, { method, headers, ...tlsClient(options.client), agent: options.agent ?? false }, onResponse)
        : http.request(url, { method, headers, agent: false }, onResponse);
    req.on('error', reject);
    req.end(payload);
  });
}

/** Trusts our server certificate (it names 127.0.0.1), and presents the client's when there is one. */
function tlsClient(client?: KeyPair): tls.ConnectionOptions {
  return { ca: certs.server.cert, ...(client ? { cert: client.cert, key: client.key } : {}) };
}

/** Writes `request` as it is on a fresh connection and returns everything the server sends back. */
function raw(base: string, request: string, client?: KeyPair): Promise<string> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const port = Number(url.port);
    const socket =
      url.protocol === 'https:'
        ? tls.connect({ host: url.hostname, port, ...tlsClient(client) }, () => socket.write(request))
        : net.connect({ host: url.hostname, port }, () => socket.write(request));
    let out = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (out += chunk));
    socket.on('close', () => resolve(out));
    socket.on('error', reject);
  });
}

function statusLine(response: string): string {
  return response.slice(0, response.indexOf('\r\n'));
}

function bodyOf(response: string): string {
  return response.slice(response.indexOf('\r\n\r\n') + 4);
}

/**
 * Resolves once a server of this process has parsed the head of a `method` request for `path`
 * and handed it on: from then on the request is in flight, its body possibly still to come.
 */
function serverReceives(method: string, path: string): Promise<void> {
  return new Promise((resolve) => {
    const onStart = (message: unknown) => {
      const { request } = message as { request: http.IncomingMessage };
      if (request.method !== method || request.url !== path) return;
      diagnostics.unsubscribe('http.server.request.start', onStart);
      resolve();
    };
    diagnostics.subscribe('http.server.request.start', onStart);
  });
}

interface MtlsServer {
  server: RunningServer;
  idp: TestIdentityProvider;
  /** Stops the server (if the test has not) and removes what it used. */
  close(): Promise<void>;
}

async function startMtlsServer(dialect: TestDatabase['dialect'], env: Record<string, string> = {}): Promise<MtlsServer> {
  const idp = await startIdentityProvider({ audience: BASE_URL });
  const testDatabase = await createTestDatabase(dialect);
  try {
    const server = await startServer(
      testConfig(testDatabase.url, {
        PORT: '0',
        HOST: '127.0.0.1',
        TLS_PORT: '0',
        TLS_CERT_FILE: certs.server.certFile,
        TLS_KEY_FILE: certs.server.keyFile,
        AGENT_TRUSTED_ISSUERS: JSON.stringify([idp.trusted]),
        ...env,
      }),
    );
    return {
      server,
      idp,
      async close() {
        await server.stop();
        await testDatabase.drop();
        await idp.close();
      },
    };
  } catch (err) {
    await testDatabase.drop();
    await idp.close();
    throw err;
  }
}

for (const dialect of testDialects()) {
  describe(`the mTLS listener (RFC 8705) on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let started: MtlsServer;
    let plain: string;
    let secure: string;
    let tlsPort: number;

    before(async () => {
      started = await startMtlsServer(dialect);
      plain = started.server.url;
      secure = started.server.tlsUrl!;
      tlsPort = Number(new URL(secure).port);
    });
    after(() => started?.close());

    /** An ID-JAG for a new identity: each assertion is single use, and each test its own agent. */
    const assertion = () => started.idp.mint({ sub: `user-${randomUUID()}` });
    const registration = async (credentialType?: 'mtls' | 'bearer_token', idJag?: string) => ({
      type: 'identity_assertion',
      assertion_type: ID_JAG_TOKEN_TYPE,
      assertion: idJag ?? (await assertion()),
      ...(credentialType ? { requested_credential_type: credentialType } : {}),
    });

    it('listens on a port of its own, and reports the real one when TLS_PORT=0 picks it', () => {
      assert.match(secure, /^https:\/\/127\.0\.0\.1:\d+$/);
      assert.ok(tlsPort > 0);
      assert.notEqual(tlsPort, Number(new URL(plain).port));
    });

    it("the metadata advertises certificate-bound tokens and the mTLS aliases, on BASE_URL's host", async () => {
      const mtlsOrigin = `https://restock.test:${tlsPort}`;
      for (const base of [plain, secure]) {
        const as = await call(base, '/.well-known/oauth-authorization-server');
        assert.equal(as.status, 200);
        const metadata = as.json();
        assert.equal(metadata.tls_client_certificate_bound_access_tokens, true);
        assert.deepEqual(metadata.mtls_endpoint_aliases, {
          token_endpoint: `${mtlsOrigin}/oauth/token`,
          revocation_endpoint: `${mtlsOrigin}/oauth/revoke`,
        });
        assert.equal(metadata.agent_auth.identity_assertion[ID_JAG_TOKEN_TYPE].mtls_register_uri, `${mtlsOrigin}/api/agent/register`);
        assert.deepEqual(metadata.agent_auth.identity_assertion[ID_JAG_TOKEN_TYPE].credential_types_supported, ['bearer_token', 'mtls']);
        const resource = (await call(base, '/.well-known/oauth-protected-resource')).json();
        assert.equal(resource.tls_client_certificate_bound_access_tokens, true);
      }
    });

    it('an mtls registration binds the credential to the certificate presented, and only that certificate can use it', async () => {
      const res = await call(secure, '/api/agent/register', { json: await registration('mtls'), client: certs.clientA });
      assert.equal(res.status, 201, res.body);
      const registered = res.json();
      assert.equal(registered.credential_type, 'mtls');
      assert.deepEqual(decodeJwt(registered.credential).cnf, { 'x5t#S256': certs.clientA.thumbprint });
      const token: string = registered.credential;

      const me = await call(secure, '/api/agent/me', { token, client: certs.clientA });
      assert.equal(me.status, 200, me.body);
      assert.equal(me.json().registration_id, registered.registration_id);
      assert.equal(me.json().credential_type, 'mtls');

      const refusals: [string, Answer][] = [
        ['another certificate', await call(secure, '/api/agent/me', { token, client: certs.clientB })],
        ['no certificate', await call(secure, '/api/agent/me', { token })],
        ['the plain listener', await call(plain, '/api/agent/me', { token })],
      ];
      for (const [how, refusal] of refusals) {
        assert.equal(refusal.status, 401, `${how}: ${refusal.body}`);
        assert.equal(refusal.json().error, 'invalid_token', how);
        assert.match(String(refusal.headers['www-authenticate']), /error="invalid_token"/, how);
      }
    });

    it('mtls is refused (400 invalid_request) without a certificate to bind, before the assertion is spent', async () => {
      const idJag = await assertion();
      const overPlain = await call(plain, '/api/agent/register', { json: await registration('mtls', idJag) });
      const noCertificate = await call(secure, '/api/agent/register', { json: await registration('mtls', idJag) });
      for (const res of [overPlain, noCertificate]) {
        assert.equal(res.status, 400, res.body);
        assert.equal(res.json().error, 'invalid_request');
      }
      const withCertificate = await call(secure, '/api/agent/register', { json: await registration('mtls', idJag), client: certs.clientB });
      assert.equal(withCertificate.status, 201, withCertificate.body);
      assert.deepEqual(decodeJwt(withCertificate.json().credential).cnf, { 'x5t#S256': certs.clientB.thumbprint });
    });

    it('bearer credentials are not bound, whichever listener issued them, and work on both', async () => {
      const issued = [
        (await call(secure, '/api/agent/register', { json: await registration('bearer_token'), client: certs.clientA })).json(),
        (await call(secure, '/api/agent/register', { json: await registration() })).json(),
        (await call(plain, '/api/agent/register', { json: await registration('bearer_token') })).json(),
        (await call(secure, '/api/agent/register', { json: { type: 'anonymous' }, client: certs.clientA })).json(),
      ];
      for (const registered of issued) {
        assert.equal(registered.credential_type, 'bearer_token');
        assert.equal(decodeJwt(registered.credential).cnf, undefined);
        for (const [base, client] of [[plain], [secure], [secure, certs.clientA], [secure, certs.clientB]] as const) {
          const me = await call(base, '/api/agent/me', { token: registered.credential, client });
          assert.equal(me.status, 200, `${base} ${client ? 'with' : 'without'} a certificate: ${me.body}`);
        }
      }
    });

    it('the token endpoint over the mTLS listener binds the access token to the certificate presented', async () => {
      const exchange = async (base: string, client?: KeyPair) => {
        const res = await call(base, '/oauth/token', { form: { grant_type: JWT_BEARER_GRANT, assertion: await assertion() }, client });
        assert.equal(res.status, 200, res.body);
        return res.json().access_token as string;
      };
      const bound = await exchange(secure, certs.clientA);
      assert.deepEqual(decodeJwt(bound).cnf, { 'x5t#S256': certs.clientA.thumbprint });
      assert.equal((await call(secure, '/api/agent/me', { token: bound, client: certs.clientA })).status, 200);
      assert.equal((await call(secure, '/api/agent/me', { token: bound, client: certs.clientB })).status, 401);
      assert.equal((await call(plain, '/api/agent/me', { token: bound })).status, 401);

      for (const unbound of [await exchange(secure), await exchange(plain)]) {
        assert.equal(decodeJwt(unbound).cnf, undefined);
        assert.equal((await call(plain, '/api/agent/me', { token: unbound })).status, 200);
      }
    });

    it('an mtls agent cannot get an unbound token: neither at the token endpoint nor by registering for a bearer one', async () => {
      const sub = `user-${randomUUID()}`;
      const registered = await call(secure, '/api/agent/register', {
        json: await registration('mtls', await started.idp.mint({ sub })),
        client: certs.clientA,
      });
      assert.equal(registered.status, 201, registered.body);
      for (const base of [plain, secure]) {
        const token = await call(base, '/oauth/token', { form: { grant_type: JWT_BEARER_GRANT, assertion: await started.idp.mint({ sub }) } });
        assert.equal(token.status, 400, token.body);
        assert.equal(token.json().error, 'invalid_request');
      }
      const bearer = await call(plain, '/api/agent/register', { json: await registration('bearer_token', await started.idp.mint({ sub })) });
      assert.equal(bearer.status, 400, bearer.body);
      const rebound = await call(secure, '/oauth/token', {
        form: { grant_type: JWT_BEARER_GRANT, assertion: await started.idp.mint({ sub }) },
        client: certs.clientB,
      });
      assert.equal(rebound.status, 200, rebound.body);
      assert.deepEqual(decodeJwt(rebound.json().access_token).cnf, { 'x5t#S256': certs.clientB.thumbprint });
    });

    it('serves the same app: request ids, problems, and malformed requests answered alike on both listeners', async () => {
      const answers = await Promise.all(
        [plain, secure].map((base) => call(base, '/no/such/page', { client: base === secure ? certs.clientA : undefined })),
      );
      for (const res of answers) {
        assert.equal(res.status, 404);
        assert.match(String(res.headers['content-type']), /^application\/problem\+json/);
        assert.ok(res.headers['x-request-id']);
      }
      assert.deepEqual(
        answers.map((res) => ({ ...res.json(), requestId: undefined })),
        answers.map(() => ({ ...answers[0]!.json(), requestId: undefined })),
      );

      const noHost = 'GET /api/health HTTP/1.1\r\nConnection: close\r\n\r\n';
      const broken = 'GET /api/health HTTP/1.1\r\nHost: restock.test\r\nthis is not a header\r\n\r\n';
      for (const request of [noHost, broken]) {
        const [overPlain, overTls] = [await raw(plain, request), await raw(secure, request, certs.clientA)];
        assert.match(statusLine(overPlain), /^HTTP\/1\.1 400 /);
        assert.equal(statusLine(overTls), statusLine(overPlain));
        const problem = JSON.parse(bodyOf(overTls));
        assert.equal(problem.type, `${BASE_URL}/problems/malformed-request`);
        assert.deepEqual({ ...problem, requestId: undefined }, { ...JSON.parse(bodyOf(overPlain)), requestId: undefined });
      }
    });
  });

  describe(`stopping with the mTLS listener on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    // Fails by timing out: without the sweep the stop waits for the 60 s timeout.
    it('stops both listeners together, finishes in-flight requests, then lets the kept-alive connection go', { timeout: 30_000 }, async () => {
      const started = await startMtlsServer(dialect, { SHUTDOWN_TIMEOUT_MS: '60000' });
      const { server } = started;
      const keepAlive = new https.Agent({ keepAlive: true, ...tlsClient(certs.clientA) });
      try {
        assert.equal((await call(server.tlsUrl!, '/api/health', { agent: keepAlive })).status, 200, 'warms a kept-alive connection');

        // A registration whose body is still arriving when the stop begins.
        const body = JSON.stringify({ type: 'anonymous' });
        const url = new URL('/api/agent/register', server.tlsUrl);
        const routed = serverReceives('POST', url.pathname);
        let sent!: () => void;
        let socket!: Promise<net.Socket>;
        let reused!: () => boolean;
        const response = new Promise<Answer>((resolve, reject) => {
          const req = https.request(
            url,
            { method: 'POST', agent: keepAlive, headers: { 'content-type': 'application/json', 'content-length': String(body.length) } },
            (res) => {
              let text = '';
              res.setEncoding('utf8');
              res.on('data', (chunk: string) => (text += chunk));
              res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text, json: () => JSON.parse(text) }));
            },
          );
          socket = new Promise((resolveSocket) => req.once('socket', resolveSocket));
          reused = () => req.reusedSocket;
          req.on('error', reject);
          req.write(body.slice(0, 5));
          sent = () => req.end(body.slice(5));
        });
        await routed;
        const connection = await socket;
        assert.ok(reused(), 'the registration travels over the warmed kept-alive connection');
        const connectionClosed = new Promise<void>((resolve) => connection.once('close', () => resolve()));

        let stopped = false;
        const stopping = server.stop().then(() => (stopped = true));
        await eventually(async () => (await refusesConnections(server.url)) && (await refusesConnections(server.tlsUrl!)), 'both listeners refuse connections');
        assert.equal(stopped, false, 'the stop waits for the request in flight');

        sent();
        const res = await response;
        assert.equal(res.status, 201, res.body);
        assert.equal(res.json().credential_type, 'bearer_token');
        // Only the server can close it: the agent keeps idle sockets open until destroyed.
        await connectionClosed;
        await stopping;
      } finally {
        keepAlive.destroy();
        await started.close();
      }
    });

    // Fails by timing out: uncut, the connection holds the stop until the 120 s handshake timeout.
    it('a connection stalled before its TLS handshake is cut at the shutdown timeout', { timeout: 15_000 }, async () => {
      const started = await startMtlsServer(dialect, { SHUTDOWN_TIMEOUT_MS: '300' });
      const { server } = started;
      const url = new URL(server.tlsUrl!);
      const stalled = net.connect({ host: url.hostname, port: Number(url.port) });
      const closed = new Promise((resolve) => stalled.on('close', resolve));
      stalled.on('error', () => {});
      try {
        await new Promise((resolve) => stalled.once('connect', resolve));
        await server.stop();
        await closed;
      } finally {
        stalled.destroy();
        await started.close();
      }
    });
  });
}

describe('mTLS listener configuration', () => {
  const attempt = async (env: Record<string, string>) => {
    const testDatabase = await createTestDatabase('sqlite');
    try {
      const server = await startServer(testConfig(testDatabase.url, { PORT: '0', HOST: '127.0.0.1', TLS_PORT: '0', ...env }));
      await server.stop();
      return undefined;
    } catch (err) {
      return err;
    } finally {
      await testDatabase.drop();
    }
  };

  it('an unreadable certificate file is a configuration error naming the variable', async () => {
    const err = await attempt({ TLS_CERT_FILE: `${certs.server.certFile}.missing`, TLS_KEY_FILE: certs.server.keyFile });
    assert.ok(err instanceof ConfigError, String(err));
    assert.match(err.message, /TLS_CERT_FILE: cannot read .*\.missing \(ENOENT\)/);
    assert.doesNotMatch(err.message, /TLS_KEY_FILE/);
  });

  it('a key that does not match the certificate is a configuration error', async () => {
    const err = await attempt({ TLS_CERT_FILE: certs.server.certFile, TLS_KEY_FILE: certs.clientA.keyFile });
    assert.ok(err instanceof ConfigError, String(err));
    assert.match(err.message, /TLS_CERT_FILE, TLS_KEY_FILE: not a usable certificate and private key/);
  });

  it('a port already taken fails the start and leaves nothing open', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = (taken.address() as net.AddressInfo).port;
      for (const env of [{ TLS_PORT: String(port) }, { PORT: String(port) }] as Record<string, string>[]) {
        const err = await attempt({ TLS_CERT_FILE: certs.server.certFile, TLS_KEY_FILE: certs.server.keyFile, ...env });
        assert.equal((err as NodeJS.ErrnoException | undefined)?.code, 'EADDRINUSE', String(err));
      }
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });
});
