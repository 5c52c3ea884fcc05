/**
 * The front door as an agent (or a readiness scanner) meets it: everything fetched over real
 * HTTP from the service listening on loopback, whose origin is its BASE_URL (every document
 * carries absolute URLs). `/` and `/docs` in HTML and Markdown saying the same; robots.txt,
 * sitemap.xml and llms.txt; the RFC 9727 API catalog; the MCP server card matching what the
 * official MCP client is told; the A2A agent card (both versions) and the official A2A client
 * reading it; the agent skills, their digests, and their shell commands run as
 * written with curl; auth.md matching the `agent_auth` metadata; every URL in every document
 * answering.
 *
 * On SQLite only: these documents are built from configuration and routes, not from storage;
 * the little the skills' commands store (agents, subscriptions, checkout sessions) is covered on
 * both databases by the API's own tests.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import net from 'node:net';
import { after, before, describe, it } from './fixtures/suites.ts';
import { ClientFactory } from '@a2a-js/sdk/client';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { startListeningTestApp, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';

failOnLeakedHandles();

const SKILLS_SCHEMA = 'https://schemas.agentskills.io/discovery/0.2.0/schema.json';
const RFC9727_PROFILE = 'https://www.rfc-editor.org/info/rfc9727';
const SKILL_NAME = /^[a-z0-9]+(-[a-z0-9]+)*$/;

/**
 * URLs in the documents that do not answer a plain GET with 2xx, each with the request that
 * shows it is there and the exact answer. POST-only endpoints are named with POST in every
 * document that mentions them; an empty body is refused by validation, which proves the route.
 */
const NOT_PLAIN_GET: Record<string, { method: 'GET' | 'POST'; status: number; reason: string }> = {
  '/api': { method: 'GET', status: 402, reason: 'the API index is paid per request without a token' },
  '/mcp': { method: 'GET', status: 405, reason: 'Streamable HTTP: a stream is opened only within a session (Mcp-Session-Id), so a GET without one has none to open' },
  '/a2a': { method: 'GET', status: 405, reason: 'A2A JSON-RPC is POSTed' },
  '/dashboard': { method: 'GET', status: 303, reason: 'merchants only: sends to the sign-in page' },
  '/api/agent/claim': { method: 'GET', status: 400, reason: 'the claim page needs the claim_token it was handed' },
  '/api/agent/register': { method: 'POST', status: 400, reason: 'POST-only: registration' },
  '/api/v1/alerts/subscribe': { method: 'POST', status: 402, reason: 'POST-only, paid per request without a token' },
  '/oauth/token': { method: 'POST', status: 400, reason: 'POST-only: token endpoint' },
  '/oauth/revoke': { method: 'POST', status: 400, reason: 'POST-only: revocation endpoint' },
};

describe('agent readiness of the front door', () => {
  let t: TestApp;
  let base: string;
  let mcp: Client | undefined;

  before(async () => {
    ({ t, base } = await startListeningTestApp('sqlite', {
      // Both payment protocols offered, so a 402 carries what pay-per-request describes. Nothing
      // is ever paid here, so nothing reaches these addresses (nothing listens on port 9).
      X402_PAY_TO: '0x1111111111111111111111111111111111111111',
      X402_FACILITATOR_URL: 'http://127.0.0.1:9',
      MPP_TEMPO_RECIPIENT: '0x2222222222222222222222222222222222222222',
      MPP_TEMPO_RPC_URL: 'http://127.0.0.1:9',
    }));
  });
  after(async () => {
    await mcp?.close();
    await t?.close();
  });

  const get = (path: string, init: RequestInit = {}) => fetch(path.startsWith('http') ? path : `${base}${path}`, { redirect: 'manual', ...init });
  const getText = async (path: string, accept?: string) => {
    const res = await get(path, accept ? { headers: { accept } } : {});
    assert.equal(res.status, 200, `${path}: ${res.status}`);
    return { res, text: await res.text() };
  };
  const getJson = async (path: string) => {
    const res = await get(path);
    assert.equal(res.status, 200, `${path}: ${res.status}`);
    assert.equal(mediaType(res.headers.get('content-type')), 'application/json', path);
    return (await res.json()) as Record<string, unknown>;
  };

  for (const path of ['/', '/docs']) {
    it(`${path}: HTML by default, Markdown on request, with Link relations that resolve`, async () => {
      const html = await get(path);
      assert.equal(html.status, 200);
      assert.equal(html.headers.get('content-type'), 'text/html; charset=utf-8');
      assert.match(await html.text(), /^<!doctype html>/i);
      assert.ok(varies(html.headers), 'Vary names Accept');

      const browser = await get(path, { headers: { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' } });
      assert.equal(mediaType(browser.headers.get('content-type')), 'text/html');
      await browser.arrayBuffer();

      // Scanners often ask with HEAD: the same Link header, no body.
      const head = await get(path, { method: 'HEAD' });
      assert.equal(head.status, 200);
      assert.equal(head.headers.get('link'), html.headers.get('link'));
      assert.equal((await head.arrayBuffer()).byteLength, 0);

      const md = await get(path, { headers: { accept: 'text/markdown' } });
      assert.equal(md.status, 200);
      assert.equal(md.headers.get('content-type'), 'text/markdown; charset=utf-8');
      assert.match(await md.text(), /^# \S/);
      assert.ok(varies(md.headers), 'Vary names Accept');

      const links = parseLinkHeader(html.headers.get('link') ?? '');
      assert.deepEqual(parseLinkHeader(md.headers.get('link') ?? ''), links, 'the same Link header on both representations');
      const rels = new Map(links.map((l) => [l.params.rel, l]));
      for (const rel of ['api-catalog', 'service-desc', 'service-doc', 'describedby']) {
        const link = rels.get(rel);
        assert.ok(link, `Link rel="${rel}"`);
        assert.ok(link.params.type, `rel="${rel}" declares a type`);
        assert.ok(link.target.startsWith(`${base}/`), `${rel} is absolute on this origin: ${link.target}`);
        const target = await get(link.target);
        assert.equal(target.status, 200, `${rel} ${link.target}`);
        assert.equal(mediaType(target.headers.get('content-type')), servedAs(link.params.type), `${rel} ${link.target} is served as its declared type`);
        await target.arrayBuffer();
      }
      assert.equal(rels.get('api-catalog')!.target, `${base}/.well-known/api-catalog`);
      assert.equal(rels.get('service-desc')!.target, `${base}/openapi.json`);
      assert.equal(rels.get('service-doc')!.target, `${base}/docs`);
    });
  }

  it('/docs lists exactly the operations of /openapi.json', async () => {
    const openapi = await getJson('/openapi.json');
    const fromSpec = new Map<string, string>();
    for (const [path, item] of Object.entries(openapi.paths as Record<string, Record<string, { operationId?: string }>>)) {
      for (const [method, op] of Object.entries(item)) {
        if (op.operationId) fromSpec.set(op.operationId, `${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`);
      }
    }
    const { text } = await getText('/docs', 'text/markdown');
    const fromDocs = new Map<string, string>();
    for (const line of text.split('\n')) {
      const row = /^\| `([A-Z]+ [^`]+)` \| (\w+) \|/.exec(line);
      if (row) fromDocs.set(row[2]!, row[1]!);
    }
    assert.ok(fromSpec.size > 0);
    assert.deepEqual([...fromDocs.keys()].sort(), [...fromSpec.keys()].sort(), 'operationIds');
    assert.deepEqual(new Map([...fromDocs].sort()), new Map([...fromSpec].sort()), 'each with its method and path');
  });

  for (const path of ['/', '/docs']) {
    it(`${path}: the HTML and the Markdown say the same`, async () => {
      const { text: htmlText } = await getText(path);
      const { text: mdText } = await getText(path, 'text/markdown');
      const fromHtml = htmlView(htmlText);
      const fromMd = markdownView(mdText);
      assert.ok(fromHtml.headings.length > 1 && fromHtml.links.size > 0 && fromHtml.words.length > 50, 'something to compare');
      assert.deepEqual(fromMd.headings, fromHtml.headings, 'headings, in order');
      assert.deepEqual([...fromMd.links].sort(), [...fromHtml.links].sort(), 'link targets');
      assert.deepEqual(fromMd.words, fromHtml.words, 'visible text, word by word');
      // A Markdown renderer would take raw tags outside code for HTML and drop them.
      assert.deepEqual(fromMd.rawHtml, [], 'no raw HTML outside code in the Markdown');
    });
  }

  it('every URL in every document answers on the running service', async () => {
    const found = new Map<string, Set<string>>();
    const add = (url: string, source: string) => {
      const clean = url.replace(/[.,;:]+$/, '');
      (found.get(clean) ?? found.set(clean, new Set()).get(clean)!).add(source);
    };
    const addText = (text: string, source: string) => {
      for (const url of text.match(URL_IN_TEXT) ?? []) add(url, source);
    };
    const addJson = (value: unknown, source: string) => {
      for (const text of stringsIn(value)) addText(text, source);
    };

    for (const path of ['/', '/docs']) {
      const res = await get(path, { headers: { accept: 'text/markdown' } });
      for (const link of parseLinkHeader(res.headers.get('link') ?? '')) add(link.target, `Link of ${path}`);
      addText(await res.text(), `Markdown of ${path}`);
    }
    const robots = (await getText('/robots.txt')).text;
    for (const m of robots.matchAll(/^Sitemap:\s*(\S+)/gim)) add(m[1]!, 'robots.txt');
    const sitemap = (await getText('/sitemap.xml')).text;
    for (const m of sitemap.matchAll(/<loc>([^<]*)<\/loc>/g)) add(decodeEntities(m[1]!), 'sitemap.xml');
    const llms = (await getText('/llms.txt')).text;
    for (const m of llms.matchAll(/\]\(([^)\s]+)\)/g)) add(m[1]!, 'llms.txt');
    addText(llms, 'llms.txt');
    addJson(JSON.parse((await getText('/.well-known/api-catalog')).text), 'api-catalog');
    addJson(await getJson('/.well-known/mcp/server-card.json'), 'MCP server card');
    addJson(await getJson('/.well-known/agent-card.json'), 'A2A agent card');
    addJson((await (await get('/.well-known/agent-card.json', { headers: { 'a2a-version': '1.0' } })).json()) as unknown, 'A2A agent card (1.0)');
    addJson(await getJson('/.well-known/agent-skills/index.json'), 'skills index');
    addText((await getText('/auth.md')).text, 'auth.md');
    // Linked from the front door and the card: documents too. The SKILL.md files are not walked
    // here: their commands (with their placeholders) are run as written further down.
    addJson(await getJson('/.well-known/oauth-protected-resource'), 'protected resource metadata');
    addJson(await getJson('/.well-known/oauth-authorization-server'), 'authorization server metadata');
    addJson(await getJson('/openapi.json'), 'openapi.json');

    const card = await getJson('/.well-known/mcp/server-card.json');
    const named = [card.documentationUrl, (card.transport as { endpoint: unknown }).endpoint, (card.authorization as { protectedResourceMetadata: unknown }).protectedResourceMetadata];
    for (const url of named) assert.ok(typeof url === 'string' && found.has(url), `the card's ${String(url)} is collected`);

    const origin = new URL(base).origin;
    const exceptionsSeen = new Set<string>();
    const failures: string[] = [];
    let probed = 0;
    for (const [url, sources] of [...found].sort(([a], [b]) => a.localeCompare(b))) {
      const parsed = new URL(url);
      const from = [...sources].join(', ');
      if (parsed.origin !== origin) {
        if (parsed.protocol !== 'https:') failures.push(`${url} (in ${from}) is on another origin and not https`);
        continue;
      }
      const exception = NOT_PLAIN_GET[parsed.pathname];
      const method = exception?.method ?? 'GET';
      const res = await get(url, method === 'POST' ? { method, headers: { 'content-type': 'application/json' }, body: '{}' } : {});
      await res.arrayBuffer();
      probed++;
      if (exception) {
        exceptionsSeen.add(parsed.pathname);
        if (res.status !== exception.status) failures.push(`${method} ${url} (in ${from}): ${res.status}, expected ${exception.status} (${exception.reason})`);
      } else if (res.status < 200 || res.status > 299) {
        failures.push(`GET ${url} (in ${from}): ${res.status}`);
      }
    }
    assert.deepEqual(failures, []);
    assert.ok(probed > 20, `${probed} URLs on this origin`);
    assert.deepEqual([...exceptionsSeen].sort(), Object.keys(NOT_PLAIN_GET).sort(), 'every listed exception is still named somewhere');
  });

  it('robots.txt: groups for everyone and for named AI crawlers, each with its Content-Signal, and the sitemap', async () => {
    const { res, text } = await getText('/robots.txt');
    assert.equal(mediaType(res.headers.get('content-type')), 'text/plain');
    const { groups, sitemaps, orphans } = parseRobots(text);
    assert.deepEqual(orphans, [], 'no rule outside a group');
    assert.ok(groups.some((g) => g.agents.includes('*')), 'a User-agent: * group');
    const named = groups.find((g) => g.agents.some((a) => /^gptbot$/i.test(a)));
    assert.ok(named, 'a group naming GPTBot');
    assert.ok(named.agents.some((a) => /^claudebot$/i.test(a)), 'ClaudeBot in it');
    for (const group of groups) {
      const who = group.agents.join(', ');
      const signals = group.rules.filter((r) => r.key === 'content-signal');
      assert.equal(signals.length, 1, `one Content-Signal for ${who}`);
      assert.match(signals[0]!.value, /^(?:[a-z-]+=(?:yes|no))(?:,\s*[a-z-]+=(?:yes|no))*$/, `Content-Signal syntax for ${who}`);
      assert.ok(group.rules.some((r) => r.key === 'disallow' && r.value === '/dashboard'), `Disallow: /dashboard for ${who}`);
    }
    assert.deepEqual(sitemaps, [`${base}/sitemap.xml`]);
  });

  it('sitemap.xml: a sitemaps.org urlset of absolute URLs on this origin', async () => {
    const { res, text } = await getText('/sitemap.xml');
    assert.ok(['application/xml', 'text/xml'].includes(mediaType(res.headers.get('content-type'))), String(res.headers.get('content-type')));
    assert.match(text, /^<\?xml version="1\.0" encoding="UTF-8"\?>\s*<urlset xmlns="http:\/\/www\.sitemaps\.org\/schemas\/sitemap\/0\.9">/);
    assert.match(text, /<\/urlset>\s*$/);
    const locs = [...text.matchAll(/<loc>([^<]*)<\/loc>/g)].map((m) => decodeEntities(m[1]!));
    assert.equal(locs.length, [...text.matchAll(/<url>/g)].length, 'one <loc> per <url>');
    assert.ok(locs.includes(`${base}/`) && locs.includes(`${base}/docs`));
    for (const loc of locs) assert.equal(new URL(loc).origin, base, loc);
  });

  it('llms.txt: an H1, a summary blockquote, then H2 sections of links', async () => {
    const { res, text } = await getText('/llms.txt');
    assert.ok(['text/plain', 'text/markdown'].includes(mediaType(res.headers.get('content-type'))));
    const lines = text.split('\n');
    assert.match(lines[0]!, /^# \S/);
    const firstH2 = lines.findIndex((l) => l.startsWith('## '));
    assert.ok(firstH2 > 0, 'H2 sections');
    assert.ok(lines.slice(1, firstH2).some((l) => /^> \S/.test(l)), 'a > summary before the sections');
    const sections = new Map<string, number>();
    let current = '';
    for (const line of lines.slice(firstH2).filter((l) => l.trim() !== '')) {
      if (line.startsWith('## ')) {
        current = line.slice(3);
        sections.set(current, 0);
        continue;
      }
      assert.match(line, /^- \[[^\]]+\]\([^)\s]+\)(?:: .+)?$/, `a "- [name](url)" item under ${current}`);
      sections.set(current, sections.get(current)! + 1);
    }
    for (const [heading, items] of sections) assert.ok(items > 0, `${heading} has items`);
  });

  it('/.well-known/api-catalog: an RFC 9727 linkset, and the OpenAPI document it describes', async () => {
    const res = await get('/.well-known/api-catalog');
    assert.equal(res.status, 200);
    assert.equal(mediaType(res.headers.get('content-type')), 'application/linkset+json');
    assert.equal(mediaTypeParams(res.headers.get('content-type')).get('profile'), RFC9727_PROFILE);
    const catalog = (await res.json()) as { linkset: Array<Record<string, unknown>> };
    assert.ok(Array.isArray(catalog.linkset) && catalog.linkset.length > 0, 'a non-empty linkset');
    for (const entry of catalog.linkset) {
      assert.equal(typeof entry.anchor, 'string');
      for (const rel of ['service-desc', 'service-doc', 'status']) {
        const targets = entry[rel] as Array<{ href?: unknown; type?: unknown }>;
        assert.ok(Array.isArray(targets) && targets.length > 0, `${rel} is a non-empty array`);
        for (const target of targets) assert.equal(typeof target.href, 'string', `${rel} href`);
      }
      for (const [rel, targets] of Object.entries(entry)) {
        if (rel === 'anchor') continue;
        for (const target of targets as Array<{ href: string; type?: string }>) {
          const answer = await get(target.href);
          assert.equal(answer.status, 200, `${rel} ${target.href}`);
          if (target.type) assert.equal(mediaType(answer.headers.get('content-type')), servedAs(target.type), `${rel} ${target.href} is served as its declared type`);
          await answer.arrayBuffer();
        }
      }
    }
    const desc = (catalog.linkset[0]!['service-desc'] as Array<{ href: string }>)[0]!;
    const openapi = (await (await get(desc.href)).json()) as { openapi: string; paths: object };
    assert.match(openapi.openapi, /^3\.1\.\d+$/);
    assert.ok(Object.keys(openapi.paths).length > 0);

    const head = await get('/.well-known/api-catalog', { method: 'HEAD' });
    assert.equal(head.status, 200);
    const self = parseLinkHeader(head.headers.get('link') ?? '');
    assert.ok(self.some((l) => l.target === `${base}/.well-known/api-catalog` && l.params.rel === 'api-catalog'), head.headers.get('link') ?? 'no Link');
    assert.equal(await head.text(), '');
    // fetch never reads a HEAD body; the socket shows nothing follows the headers.
    const raw = await rawRequest(base, 'HEAD /.well-known/api-catalog HTTP/1.1');
    assert.match(raw.head, /^HTTP\/1\.1 200 /);
    assert.equal(raw.body, '', 'no body after the headers');
  });

  it('/.well-known/api-catalog is labelled with exactly the RFC 9727 media type and profile, on GET and HEAD', async () => {
    for (const method of ['GET', 'HEAD']) {
      const res = await get('/.well-known/api-catalog', { method });
      await res.arrayBuffer();
      assert.equal(res.headers.get('content-type'), `application/linkset+json; profile="${RFC9727_PROFILE}"`, method);
    }
  });

  it('the MCP server card is served at both locations and matches what the MCP client is told', async () => {
    const card = await getJson('/.well-known/mcp/server-card.json');
    assert.deepEqual(await getJson('/.well-known/mcp.json'), card, 'the same card at both locations');
    assert.equal(typeof card.$schema, 'string');
    assert.ok((card.$schema as string).startsWith('https://'));
    assert.equal(typeof card.version, 'string');
    assert.equal(typeof card.protocolVersion, 'string');
    const serverInfo = card.serverInfo as { name: string; version: string };
    assert.equal(typeof serverInfo.name, 'string');
    assert.equal(typeof serverInfo.version, 'string');
    assert.deepEqual(card.transport, { type: 'streamable-http', endpoint: `${base}/mcp` });
    const capabilities = card.capabilities as { tools?: object };
    assert.ok(capabilities.tools, 'capabilities.tools');
    const authorization = card.authorization as { protectedResourceMetadata: string; payPerCall: string[] };
    const metadata = await getJson(authorization.protectedResourceMetadata);
    assert.equal(metadata.resource, `${base}/mcp`, "RFC 9728 metadata of the endpoint the card describes");
    assert.ok((metadata.authorization_servers as string[]).length > 0);

    // Without a token: initialize and tools/list are open to anyone (src/mcp/routes.ts).
    mcp = new Client({ name: 'agent-readiness-test', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL((card.transport as { endpoint: string }).endpoint)));
    assert.deepEqual(mcp.getServerVersion(), serverInfo, 'serverInfo');
    assert.equal(mcp.getNegotiatedProtocolVersion(), card.protocolVersion, 'protocolVersion');
    assert.deepEqual(mcp.getServerCapabilities(), card.capabilities, 'capabilities');
    const { tools } = await mcp.listTools();
    const pick = (tool: Record<string, unknown>) => ({
      name: tool.name,
      title: tool.title,
      description: tool.description,
      inputSchema: tool.inputSchema,
      outputSchema: tool.outputSchema,
    });
    const cardTools = card.tools as Array<Record<string, unknown>>;
    assert.ok(cardTools.length > 0);
    assert.deepEqual(cardTools.map(pick), tools.map((tool) => pick(tool as unknown as Record<string, unknown>)));
    assert.ok(authorization.payPerCall.length > 0);
    for (const name of authorization.payPerCall) assert.ok(tools.some((tool) => tool.name === name), `pay-per-call tool ${name} exists`);
  });

  it('agent skills: the index, each SKILL.md with its digest and front matter, and 404 for an unknown one', async () => {
    const index = (await getJson('/.well-known/agent-skills/index.json')) as { $schema: string; skills: Array<Record<string, string>> };
    assert.equal(index.$schema, SKILLS_SCHEMA);
    assert.ok(index.skills.length > 0);
    for (const entry of index.skills) {
      assert.deepEqual(Object.keys(entry).sort(), ['description', 'digest', 'name', 'type', 'url']);
      assert.equal(entry.type, 'skill-md');
      assert.match(entry.digest!, /^sha256:[0-9a-f]{64}$/);
      const res = await get(entry.url!);
      assert.equal(res.status, 200, entry.url);
      assert.equal(mediaType(res.headers.get('content-type')), 'text/markdown');
      const bytes = Buffer.from(await res.arrayBuffer());
      assert.equal(`sha256:${createHash('sha256').update(bytes).digest('hex')}`, entry.digest, `${entry.name}: digest of the bytes served`);
      const front = frontMatter(bytes.toString('utf8'));
      assert.equal(front.get('name'), entry.name);
      assert.match(entry.name!, SKILL_NAME);
      assert.ok(entry.name!.length <= 64);
      assert.equal(front.get('description'), entry.description);
      assert.ok(entry.description!.length > 0 && entry.description!.length <= 1024);
    }
    const names = index.skills.map((s) => s.name);
    for (const name of ['register-agent', 'subscribe-restock-alert', 'pay-per-request', 'checkout-plan']) assert.ok(names.includes(name), name);

    const unknown = await get('/.well-known/agent-skills/no-such-skill/SKILL.md');
    assert.equal(unknown.status, 404);
    assert.equal(mediaType(unknown.headers.get('content-type')), 'application/problem+json');
    assert.equal(((await unknown.json()) as { status: number }).status, 404);
  });

  /** The sh blocks of a skill, run in order against the service (see runBlocks). */
  const runSkill = async (name: string) => {
    const { text } = await getText(`/.well-known/agent-skills/${name}/SKILL.md`);
    const blocks = shBlocks(text);
    assert.ok(blocks.length > 0, `${name} has sh blocks`);
    return runBlocks(blocks);
  };

  it('skill register-agent runs as written: a credential, /api/agent/me, then revoked', async () => {
    const { results, vars } = await runSkill('register-agent');
    assert.equal(results.length, 3);
    assertRanCleanly(results);
    const registered = JSON.parse(results[0]!.stdout) as { credential?: string };
    assert.equal(typeof registered.credential, 'string');
    const me = JSON.parse(results[1]!.stdout) as { status: string; scopes: string[] };
    assert.equal(me.status, 'active');
    assert.deepEqual(me.scopes, ['api:read', 'api:write']);
    const token = vars.get('TOKEN');
    assert.ok(token);
    const revoked = await get('/api/agent/me', { headers: { authorization: `Bearer ${token}` } });
    assert.equal(revoked.status, 401, 'the token the skill revoked no longer works');
    await revoked.arrayBuffer();
  });

  it('skill subscribe-restock-alert runs as written: subscribed, read, cancelled', async () => {
    const { results } = await runSkill('subscribe-restock-alert');
    assert.equal(results.length, 2);
    assertRanCleanly(results);
    const created = JSON.parse(results[0]!.stdout) as { subscriptionId: string; status: string };
    assert.equal(created.status, 'active');
    assert.match(created.subscriptionId, /^sub_/);
    const [read, cancelled] = jsonValues(results[1]!.stdout) as Array<{ subscriptionId: string; status: string }>;
    assert.equal(read?.subscriptionId, created.subscriptionId, results[1]!.stdout);
    assert.equal(read?.status, 'active');
    assert.equal(cancelled?.status, 'cancelled', results[1]!.stdout);
  });

  it('skill checkout-plan runs as written: the plans, a checkout URL, the session', async () => {
    const { results } = await runSkill('checkout-plan');
    assert.equal(results.length, 3);
    assertRanCleanly(results);
    const checkout = JSON.parse(results[1]!.stdout) as { checkoutUrl: string; sessionId: string };
    assert.match(checkout.sessionId, /^cs_/);
    assert.ok(checkout.checkoutUrl.startsWith(`${base}/`), checkout.checkoutUrl);
    const session = JSON.parse(results[2]!.stdout) as { sessionId?: string; status?: string };
    // The skill's anonymous agent is bound to no store: its checkout is a proposal to the owner.
    assert.equal(session.status, 'awaiting_owner', results[2]!.stdout);
    const plans = JSON.parse(results[0]!.stdout) as { plans?: Array<{ plan: string }> };
    assert.deepEqual(plans.plans?.map((p) => p.plan), ['starter', 'growth'], `the catalogue block prints the plans: ${results[0]!.stdout}`);
  });

  it('skill pay-per-request runs as written: HTTP 402 with x402 and MPP offers', async () => {
    const { results } = await runSkill('pay-per-request');
    assert.equal(results.length, 1);
    assertRanCleanly(results);
    const [status, ...headerLines] = results[0]!.stdout.split('\r\n').filter((l) => l.trim() !== '');
    assert.match(status!, /^HTTP\/1\.1 402 /);
    const headers = new Map<string, string[]>();
    for (const line of headerLines) {
      const at = line.indexOf(':');
      const key = line.slice(0, at).toLowerCase();
      headers.set(key, [...(headers.get(key) ?? []), line.slice(at + 1).trim()]);
    }
    assert.equal(headers.get('content-type')?.[0], 'application/problem+json; charset=utf-8');
    const required = JSON.parse(Buffer.from(headers.get('payment-required')![0]!, 'base64').toString('utf8')) as { x402Version: number; accepts: unknown[]; resource: { url: string } };
    assert.equal(required.x402Version, 2);
    assert.equal(required.resource.url, `${base}/api/v1/alerts/subscribe`);
    assert.ok(required.accepts.length > 0);
    const challenges = headers.get('www-authenticate') ?? [];
    assert.ok(challenges.some((c) => /^Payment /.test(c) && /method="tempo"/.test(c) && /intent="charge"/.test(c)), challenges.join('\n'));
  });

  it("the front page's start example runs as written and subscribes", async () => {
    const { text } = await getText('/', 'text/markdown');
    const blocks = shBlocks(text);
    assert.equal(blocks.length, 1);
    const { results } = await runBlocks(blocks);
    assertRanCleanly(results);
    const created = JSON.parse(results[0]!.stdout) as { subscriptionId: string; status: string };
    assert.equal(created.status, 'active');
    assert.match(created.subscriptionId, /^sub_/);
  });

  it('/auth.md names exactly what the agent_auth metadata gives', async () => {
    const { res, text } = await getText('/auth.md');
    assert.equal(mediaType(res.headers.get('content-type')), 'text/markdown');
    const first = text.split('\n')[0]!;
    assert.match(first, /^# /);
    assert.ok(first.includes('auth.md'), first);
    const metadata = await getJson('/.well-known/oauth-authorization-server');
    const agentAuth = metadata.agent_auth as {
      skill: string;
      register_uri: string;
      claim_uri: string;
      revocation_uri: string;
      identity_types_supported: string[];
      identity_assertion: { assertion_types_supported: string[] };
    };
    assert.equal(agentAuth.skill, `${base}/auth.md`);
    const urls = new Set((text.match(URL_IN_TEXT) ?? []).map((u) => u.replace(/[.,;:]+$/, '')));
    for (const field of ['register_uri', 'claim_uri', 'revocation_uri'] as const) assert.ok(urls.has(agentAuth[field]), `${field} ${agentAuth[field]} in auth.md`);
    assert.ok(agentAuth.identity_types_supported.length > 0);
    for (const type of agentAuth.identity_types_supported) assert.ok(text.includes(type), `identity type ${type}`);
    assert.ok(agentAuth.identity_assertion.assertion_types_supported.length > 0);
    for (const type of agentAuth.identity_assertion.assertion_types_supported) assert.ok(text.includes(type), `assertion type ${type}`);
  });

  it('the A2A agent card: 0.3 for a client naming no version, 1.0 for the official client, which finds the endpoint and its skills with it', async () => {
    const legacy = await getJson('/.well-known/agent-card.json');
    assert.equal(legacy.protocolVersion, '0.3');
    assert.equal(legacy.url, `${base}/a2a`);
    assert.equal(legacy.preferredTransport, 'JSONRPC');
    for (const field of ['name', 'description', 'version', 'capabilities', 'defaultInputModes', 'defaultOutputModes', 'skills', 'securitySchemes']) assert.ok(field in legacy, field);
    const v1 = await get('/.well-known/agent-card.json', { headers: { 'a2a-version': '1.0' } });
    assert.equal(mediaType(v1.headers.get('content-type')), 'application/json');
    assert.match(v1.headers.get('vary') ?? '', /A2A-Version/i);
    const card = (await v1.json()) as { supportedInterfaces: Array<{ url: string; protocolVersion: string }>; skills: Array<{ id: string }>; securitySchemes: Record<string, { httpAuthSecurityScheme?: { description: string } }> };
    assert.deepEqual(card.supportedInterfaces.map((face) => [face.url, face.protocolVersion]), [[`${base}/a2a`, '1.0'], [`${base}/a2a`, '0.3']]);
    assert.deepEqual(card.skills.map((skill) => skill.id), (legacy.skills as Array<{ id: string }>).map((skill) => skill.id));
    // The security scheme points at the OAuth metadata, which answers.
    const description = card.securitySchemes.agentToken?.httpAuthSecurityScheme?.description ?? '';
    for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-authorization-server']) {
      assert.ok(description.includes(`${base}${path}`), path);
      await getJson(path);
    }
    const client = await new ClientFactory().createFromUrl(base);
    assert.deepEqual((await client.getAgentCard()).skills.map((skill) => skill.id), card.skills.map((skill) => skill.id));
  });

  /**
   * Runs sh blocks in order, each in its own bash, as a reader pasting them would in one shell:
   * variables a block sets are carried to the next, and the SUBSCRIPTION_ID / SESSION_ID a
   * reader would copy are the last `sub_…` / `cs_…` ids printed before. Asynchronous: the
   * service answering curl runs in this very process.
   */
  async function runBlocks(blocks: string[]) {
    const results: Array<{ code: number; stdout: string; stderr: string }> = [];
    const assigned = new Set<string>();
    let state = '';
    let printed = '';
    for (const block of blocks) {
      let script = block;
      for (const [placeholder, prefix] of [['SUBSCRIPTION_ID', 'sub_'], ['SESSION_ID', 'cs_']] as const) {
        if (!script.includes(placeholder)) continue;
        const id = [...printed.matchAll(new RegExp(`\\b${prefix}[A-Za-z0-9]+`, 'g'))].at(-1)?.[0];
        assert.ok(id, `${placeholder}: no ${prefix}… id printed before`);
        script = script.replaceAll(placeholder, id);
      }
      for (const m of block.matchAll(/^([A-Za-z_]\w*)=/gm)) assigned.add(m[1]!);
      const marker = `--state-${results.length}--`;
      const dump = assigned.size > 0 ? `declare -p ${[...assigned].join(' ')} 2>/dev/null || true` : '';
      // -e and pipefail: a command failing anywhere in a block fails it, not only the last one.
      const full = `set -eo pipefail\n${state}\n${script}\nprintf '\\n${marker}\\n'\n${dump}\n`;
      const run = await bash(full);
      const at = run.stdout.lastIndexOf(`\n${marker}\n`);
      const stdout = at >= 0 ? run.stdout.slice(0, at) : run.stdout;
      state = at >= 0 ? run.stdout.slice(at + marker.length + 2) : state;
      printed += stdout;
      results.push({ code: run.code, stdout, stderr: run.stderr });
    }
    const vars = new Map([...state.matchAll(/^declare -\S+ (\w+)="(.*)"$/gm)].map((m) => [m[1]!, m[2]!]));
    return { results, vars };
  }
});

function assertRanCleanly(results: Array<{ code: number; stdout: string; stderr: string }>) {
  results.forEach((r, i) => {
    assert.equal(r.code, 0, `block ${i + 1} exits 0: ${r.stderr}`);
    assert.equal(r.stderr, '', `block ${i + 1} writes nothing to stderr`);
  });
}

function bash(script: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    // No proxy settings from the environment: curl must reach the loopback service directly.
    // --norc: bash takes a socket on stdin for a remote shell and would read ~/.bashrc.
    const env = { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' };
    execFile('bash', ['--norc', '--noprofile', '-c', script], { env, timeout: 20_000, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout, stderr: err && !stderr ? String(err) : stderr });
    });
  });
}

/** An HTTP/1.1 request over a plain socket: what the server really sends, body included. */
function rawRequest(base: string, requestLine: string): Promise<{ head: string; body: string }> {
  const { hostname, port, host } = new URL(base);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(Number(port), hostname, () => socket.write(`${requestLine}\r\nHost: ${host}\r\nConnection: close\r\n\r\n`));
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('end', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const at = text.indexOf('\r\n\r\n');
      resolve({ head: text.slice(0, at), body: text.slice(at + 4) });
    });
  });
}

const URL_IN_TEXT = /https?:\/\/[^\s<>"'`)\]]+/g;

function mediaType(contentType: string | null): string {
  return (contentType ?? '').split(';')[0]!.trim().toLowerCase();
}

function mediaTypeParams(contentType: string | null): Map<string, string> {
  const params = new Map<string, string>();
  for (const [, name, quoted, token] of (contentType ?? '').matchAll(/;\s*([^=;\s]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]*))/g)) {
    params.set(name!.toLowerCase(), quoted !== undefined ? quoted.replace(/\\(.)/g, '$1') : token!);
  }
  return params;
}

/** A declared type (Link or catalog `type`) must be the type the target is served as. */
function servedAs(declared: string | undefined): string {
  return mediaType(declared ?? '');
}

function varies(headers: Headers): boolean {
  return (headers.get('vary') ?? '').split(',').some((name) => name.trim().toLowerCase() === 'accept');
}

/** RFC 8288 Link: split on commas outside `<…>` and quoted strings. */
function parseLinkHeader(value: string): Array<{ target: string; params: Record<string, string> }> {
  const parts: string[] = [];
  let current = '';
  let inTarget = false;
  let inQuotes = false;
  for (const c of value) {
    if (c === '<' && !inQuotes) inTarget = true;
    else if (c === '>' && !inQuotes) inTarget = false;
    else if (c === '"' && !inTarget) inQuotes = !inQuotes;
    if (c === ',' && !inTarget && !inQuotes) {
      parts.push(current);
      current = '';
    } else current += c;
  }
  if (current.trim()) parts.push(current);
  return parts.map((part) => {
    const target = /^\s*<([^>]*)>/.exec(part);
    assert.ok(target, `a Link value starts with <target>: ${part}`);
    const params: Record<string, string> = {};
    for (const [name, quoted, token] of [...part.slice(target[0].length).matchAll(/;\s*([^=;\s]+)\s*=\s*(?:"([^"]*)"|([^;\s]*))/g)].map((m) => m.slice(1))) {
      params[name!.toLowerCase()] = quoted ?? token!;
    }
    return { target: target[1]!, params };
  });
}

/** RFC 9309 groups: consecutive user-agent lines open a group, the rules after them belong to it. */
function parseRobots(text: string) {
  const groups: Array<{ agents: string[]; rules: Array<{ key: string; value: string }> }> = [];
  const sitemaps: string[] = [];
  const orphans: string[] = [];
  let open = false;
  for (const raw of text.split('\n')) {
    const line = raw.replace(/#.*/, '').trim();
    if (!line) continue;
    const at = line.indexOf(':');
    assert.ok(at > 0, `robots.txt line "${raw}"`);
    const key = line.slice(0, at).trim().toLowerCase();
    const value = line.slice(at + 1).trim();
    if (key === 'sitemap') sitemaps.push(value);
    else if (key === 'user-agent') {
      if (!open) groups.push({ agents: [], rules: [] });
      groups.at(-1)!.agents.push(value);
      open = true;
    } else {
      open = false;
      if (groups.length === 0) orphans.push(line);
      else groups.at(-1)!.rules.push({ key, value });
    }
  }
  return { groups, sitemaps, orphans };
}

function decodeEntities(text: string): string {
  const named: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };
  return text.replace(/&(?:#(\d+)|#x([0-9a-f]+)|(\w+));/gi, (whole, dec, hex, name) => {
    if (dec) return String.fromCodePoint(Number(dec));
    if (hex) return String.fromCodePoint(parseInt(hex, 16));
    return named[name.toLowerCase()] ?? whole;
  });
}

const words = (text: string) => text.split(/\s+/).filter(Boolean);

/**
 * What a person reads in a page: its `<main>` only (the shared layout around it, brand link
 * and footer, is not part of the document the Markdown renders).
 */
function htmlView(page: string) {
  const main = /<main\b[^>]*>([\s\S]*)<\/main>/.exec(page)?.[1];
  assert.ok(main, 'the page has a <main>');
  const text = (fragment: string) =>
    decodeEntities(fragment.replace(/<\/?(?:p|li|ul|ol|h[1-6]|pre|div|table|thead|tbody|tr|th|td|br)\b[^>]*>/g, ' ').replace(/<[^>]+>/g, ''));
  const headings = [...main.matchAll(/<h([1-6])\b[^>]*>([\s\S]*?)<\/h\1>/g)].map((m) => `h${m[1]} ${words(text(m[2]!)).join(' ')}`);
  const links = new Set([...main.matchAll(/<a\b[^>]*\bhref="([^"]*)"/g)].map((m) => decodeEntities(m[1]!)));
  return { headings, links, words: words(text(main)) };
}

/** The same view of Markdown: syntax dropped, code kept as text, links as their text. */
function markdownView(markdown: string) {
  const headings: string[] = [];
  const links = new Set<string>();
  const rawHtml: string[] = [];
  const out: string[] = [];
  const PIPE = '\u0000';
  const inline = (line: string) => {
    let prose = '';
    const rendered = line.replace(/`([^`]*)`|\[([^\]]*)\]\(([^)\s]+)\)/g, (_whole, code: string | undefined, text: string | undefined, url: string | undefined) => {
      if (code !== undefined) return code;
      links.add(url!);
      prose += ` ${text}`;
      return text!;
    });
    prose += line.replace(/`[^`]*`|\[[^\]]*\]\([^)\s]+\)/g, ' ');
    rawHtml.push(...(prose.match(/<[A-Za-z/!][^>]*>/g) ?? []));
    return rendered;
  };
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^```/.test(line)) {
      fenced = !fenced;
      continue;
    }
    if (fenced) {
      out.push(line);
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      const text = inline(heading[2]!);
      headings.push(`h${heading[1]!.length} ${words(text).join(' ')}`);
      out.push(text);
      continue;
    }
    if (/^\|(?:\s*:?-+:?\s*\|)+\s*$/.test(line)) continue;
    if (/^\|.*\|\s*$/.test(line)) {
      const cells = line.replace(/\\\|/g, PIPE).trim().slice(1, -1).split('|');
      out.push(cells.map((cell) => inline(cell).replaceAll(PIPE, '|')).join(' '));
      continue;
    }
    out.push(inline(line.replace(/^>\s?/, '').replace(/^\s*[-*]\s+/, '')));
  }
  return { headings, links, words: words(out.join('\n')), rawHtml };
}

/** The bodies of the ```sh fences, in order. */
function shBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```sh\n([\s\S]*?)\n```$/gm)].map((m) => m[1]!);
}

/** Plain `key: value` lines of a YAML front matter block (all a SKILL.md header holds). */
function frontMatter(text: string): Map<string, string> {
  const block = /^---\n([\s\S]*?)\n---\n/.exec(text);
  assert.ok(block, 'front matter');
  const fields = new Map<string, string>();
  for (const line of block[1]!.split('\n')) {
    const m = /^([A-Za-z][\w-]*):\s*(.*)$/.exec(line);
    if (m) fields.set(m[1]!, m[2]!.replace(/^(["'])(.*)\1$/, '$2'));
  }
  return fields;
}

/** JSON values printed back to back (curl -s adds no newline between answers). */
function jsonValues(text: string): unknown[] {
  const values: unknown[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === '{' || c === '[') {
      if (depth++ === 0) start = i;
    } else if ((c === '}' || c === ']') && --depth === 0) values.push(JSON.parse(text.slice(start, i + 1)));
  }
  return values;
}

/** Every string in a JSON value, keys included. */
function stringsIn(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.flatMap(stringsIn);
  if (value && typeof value === 'object') return Object.entries(value).flatMap(([key, v]) => [key, ...stringsIn(v)]);
  return [];
}
