import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from './fixtures/suites.ts';
import { ConfigError, loadConfig } from '../src/config.ts';
import { Database } from '../src/core/db/database.ts';
import { MailOutboxRepository } from '../src/core/mail/outbox-repository.ts';
import { parseSmtpUrl, SmtpUrlError } from '../src/core/mail/smtp-url.ts';
import { MailDeliveryError, openMailTransport, type MailMessage, type MailTransport } from '../src/core/mail/transport.ts';
import { createTestDatabase, dialectSkip, testConfig, testDialects, type TestDatabase } from './fixtures/app.ts';
import { makeCertificates } from './fixtures/certificates.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { freePort, startSilentServer } from './fixtures/network.ts';
import { mailSystemSkipReason, startMailSystem, type MailSystem } from './fixtures/mail-system.ts';
import { startSmtpSink, type SmtpSink } from './fixtures/smtp-sink.ts';
import { uniqueEmail } from './fixtures/agents.ts';

failOnLeakedHandles();

const FROM = 'Restock <alerts@restock.test>';

/** The SMTP transport stores nothing: any use of this would fail the test. */
const unusedDatabase = {} as Database;

const message = (overrides: Partial<MailMessage> = {}): MailMessage => ({
  to: 'shopper@example.com',
  subject: 'Your code',
  text: 'Your code is 123456.',
  purpose: 'agent-claim-code',
  ...overrides,
});

for (const dialect of testDialects()) {
  describe(`mail outbox on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let testDatabase: TestDatabase;
    let database: Database;
    let transport: MailTransport;
    let outbox: MailOutboxRepository;
    before(async () => {
      testDatabase = await createTestDatabase(dialect);
      database = Database.open(testConfig(testDatabase.url).database);
      transport = openMailTransport({ smtpUrl: undefined, from: FROM, database });
      outbox = new MailOutboxRepository(database);
    });
    after(async () => {
      await transport.close();
      await database.close();
      await testDatabase.drop();
    });

    it('without an SMTP URL, mail goes to the outbox', () => {
      assert.equal(transport.kind, 'outbox');
    });

    it('a sent mail is a committed row, visible to another connection once send resolves', async () => {
      const headers = { 'List-Unsubscribe': '<https://restock.test/unsubscribe/t1>', 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' };
      const sentFrom = Date.now();
      await transport.send(message({ to: 'row@example.com', html: '<p>Your code is <b>123456</b>.</p>', headers }));
      const sentBy = Date.now();

      const other = Database.open(testConfig(testDatabase.url).database);
      try {
        const row = await other.db.selectFrom('mail_outbox').selectAll().where('recipient', '=', 'row@example.com').executeTakeFirstOrThrow();
        assert.match(row.id, /^mail_[0-9a-z]{26}$/);
        assert.equal(row.subject, 'Your code');
        assert.equal(row.text_body, 'Your code is 123456.');
        assert.equal(row.html_body, '<p>Your code is <b>123456</b>.</p>');
        assert.deepEqual(JSON.parse(row.headers), headers);
        assert.equal(row.purpose, 'agent-claim-code');
        const stamped = Date.parse(row.created_at);
        assert.ok(stamped >= sentFrom && stamped <= sentBy, `stamped while being sent: ${row.created_at}`);
      } finally {
        await other.close();
      }

      const read = await outbox.latestFor('row@example.com');
      assert.ok(read);
      assert.equal(read.to, 'row@example.com');
      assert.equal(read.html, '<p>Your code is <b>123456</b>.</p>');
      assert.deepEqual(read.headers, headers);
    });

    it('a mail without html or headers reads back with neither', async () => {
      await transport.send(message({ to: 'plain@example.com' }));
      const read = await outbox.latestFor('plain@example.com');
      assert.ok(read);
      assert.equal('html' in read, false);
      assert.deepEqual(read.headers, {});
    });

    it('latestFor picks the newest mail, of the purpose when given, even when sent back to back', async () => {
      const to = 'latest@example.com';
      for (let i = 1; i <= 5; i++) await transport.send(message({ to, text: `code ${i}` }));
      await transport.send(message({ to, purpose: 'restock-alert', text: 'back in stock' }));
      await transport.send(message({ to: 'someone-else@example.com', text: 'code 9' }));

      assert.equal((await outbox.latestFor(to, 'agent-claim-code'))?.text, 'code 5');
      assert.equal((await outbox.latestFor(to, 'restock-alert'))?.text, 'back in stock');
      assert.equal((await outbox.latestFor(to))?.text, 'back in stock');
      assert.equal(await outbox.latestFor(to, 'no-such-purpose'), undefined);
      assert.equal(await outbox.latestFor('nobody@example.com'), undefined);

      const all = await outbox.listFor(to);
      assert.deepEqual(all.map((m) => m.text), ['code 1', 'code 2', 'code 3', 'code 4', 'code 5', 'back in stock']);
      const stamps = all.map((m) => m.createdAt);
      assert.deepEqual([...new Set(stamps)].sort(), stamps, 'each mail is stamped after the one before');
    });

    it('concurrent sends are all stored', async () => {
      const to = 'burst@example.com';
      await Promise.all(Array.from({ length: 50 }, (_, i) => transport.send(message({ to, text: `n${i}` }))));
      const all = await outbox.listFor(to);
      assert.equal(all.length, 50);
      assert.equal(new Set(all.map((m) => m.id)).size, 50);
    });
  });
}

describe('mail over SMTP', () => {
  let sink: SmtpSink;
  let transport: MailTransport;
  before(async () => {
    sink = await startSmtpSink({ refuseRecipient: (address) => address.startsWith('unknown@') });
    transport = openMailTransport({ smtpUrl: sink.url, from: FROM, database: unusedDatabase });
  });
  after(async () => {
    await transport.close();
    await sink.close();
  });

  it('with an SMTP URL, mail goes to the server', () => {
    assert.equal(transport.kind, 'smtp');
  });

  it('many mails at once all arrive over the pool', async () => {
    const to = Array.from({ length: 20 }, (_, i) => `many-${i}@example.com`);
    await Promise.all(to.map((address) => transport.send(message({ to: address }))));
    for (const address of to) await sink.waitFor((m) => m.recipients.includes(address), 1000);
  });

  it('a recipient string that lists several addresses never reaches them', async () => {
    await assert.rejects(transport.send(message({ to: 'first@example.com, second@example.com' })), MailDeliveryError);
    const reached = sink.messages.filter((m) => m.recipients.some((r) => r.includes('first@') || r.includes('second@')));
    assert.deepEqual(reached, []);
  });

  it('a recipient the server refuses rejects the send, with the reply code', async () => {
    const err = await transport.send(message({ to: 'unknown@example.com' })).then(
      () => assert.fail('send resolved'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof MailDeliveryError, String(err));
    assert.equal(err.responseCode, 550);
    // The pool survives the refusal.
    await transport.send(message({ to: 'after-refusal@example.com' }));
    await sink.waitFor((m) => m.recipients.includes('after-refusal@example.com'), 1000);
  });

  it('waitFor resolves for a mail that arrives later, and times out for one that never does', async () => {
    const waiting = sink.waitFor((m) => m.recipients.includes('later@example.com'), 2000);
    await transport.send(message({ to: 'later@example.com', text: 'Your code is 777111.' }));
    assert.match((await waiting).text, /\b777111\b/);
    await assert.rejects(sink.waitFor((m) => m.recipients.includes('never@example.com'), 50), /no matching mail within 50 ms/);
  });

  it('rejects an SMTP URL of another scheme, without echoing it', () => {
    assert.throws(() => openMailTransport({ smtpUrl: 'http://user:secret@mail.example.com', from: FROM, database: unusedDatabase }), (err: Error) => {
      assert.match(err.message, /smtp:\/\/ or smtps:\/\//);
      assert.doesNotMatch(err.message, /secret/);
      return true;
    });
    assert.throws(() => openMailTransport({ smtpUrl: 'not a url secret', from: FROM, database: unusedDatabase }), (err: Error) => {
      assert.doesNotMatch(err.message, /secret/);
      return true;
    });
  });
});

describe('mail through a real mail system (Postfix, Dovecot)', { skip: mailSystemSkipReason() }, () => {
  let mail: MailSystem;
  const transports: MailTransport[] = [];
  const open = (smtpUrl: string, ca?: string) => {
    const transport = openMailTransport({ smtpUrl, from: FROM, database: unusedDatabase, ca });
    transports.push(transport);
    return transport;
  };
  before(async () => {
    mail = await startMailSystem();
  });
  after(async () => {
    for (const transport of transports) await transport.close();
  });

  async function sendError(transport: MailTransport, to: string): Promise<MailDeliveryError> {
    const err = await transport.send(message({ to })).then(
      () => assert.fail('send resolved'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof MailDeliveryError, String(err));
    return err;
  }

  it('delivers subject, text, html, custom headers and the From address as a mailbox reads them', async () => {
    const to = uniqueEmail('delivered');
    // Long enough, and non-ASCII, so the text travels quoted-printable with soft line breaks.
    const text = `Bonjour, here is your claim code for the agent café-bot: 482915. It expires in ten minutes; ignore this mail if you did not ask.`;
    await open(mail.smtpUrl).send(
      message({
        to,
        subject: 'Your claim code — Crème brûlée — 日本',
        text,
        html: '<p>Your code is <b>482915</b>.</p>',
        headers: { 'List-Unsubscribe': '<https://restock.test/unsubscribe/t1>', 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
      }),
    );
    const got = await mail.waitForMessage(to);
    assert.equal(got.deliveredTo, to);
    assert.equal(got.header('return-path'), '<alerts@restock.test>', 'the envelope sender is the From address');
    assert.equal(got.header('from'), FROM);
    assert.equal(got.header('to'), to);
    assert.equal(got.subject, 'Your claim code — Crème brûlée — 日本');
    assert.equal(got.header('list-unsubscribe'), '<https://restock.test/unsubscribe/t1>');
    assert.equal(got.header('list-unsubscribe-post'), 'List-Unsubscribe=One-Click');
    assert.equal(got.structure, 'multipart/alternative(text/plain,text/html)');
    assert.equal(got.text?.trim(), text);
    assert.equal(got.html?.trim(), '<p>Your code is <b>482915</b>.</p>');
    assert.equal(got.parts[0]!.encoding, 'quoted-printable');
    assert.ok(got.parts.every((part) => part.charset === 'utf-8'));
    const head = got.raw.slice(0, got.raw.indexOf('\r\n\r\n'));
    assert.match(head, /^[\x20-\x7e\r\n\t]*$/, 'the header is ASCII: the subject travels as encoded words, no SMTPUTF8 needed');
    assert.match(got.header('received') ?? '', /\bwith ESMTP\b/, 'Postfix took it over plain SMTP');
  });

  it('over submission, upgrades with STARTTLS to a server of the given CA and logs in', async () => {
    const to = uniqueEmail('submission');
    await open(mail.submissionUrl, mail.caPem).send(message({ to, text: 'Your code is 551177.' }));
    const got = await mail.waitForMessage(to);
    assert.match(got.text ?? '', /\b551177\b/);
    // RFC 3848: ESMTPSA is ESMTP with TLS (S) and a login (A).
    assert.match(got.header('received') ?? '', /\bwith ESMTPSA\b/);
  });

  it('over submission, a wrong password is refused with 535 and says nothing of the recipient', async () => {
    const to = uniqueEmail('wrong-password');
    const err = await sendError(open(mail.submissionUrlWithWrongPassword, mail.caPem), to);
    assert.equal(err.responseCode, 535);
    assert.equal(err.recipientRefused, false);
    assert.match(err.message, /refused the login \(reply code 535\)/);
    assert.deepEqual(await mail.messages(to), [], 'never accepted, so nothing can arrive later');
  });

  it('over submission without a login, Postfix refuses each recipient with 554 5.7.1, which is not the recipient\'s fault', async () => {
    const to = uniqueEmail('no-login');
    const err = await sendError(open(mail.submissionUrl.replace(/\/\/[^@]+@/, '//'), mail.caPem), to);
    assert.equal(err.responseCode, 554);
    assert.equal(err.recipientRefused, false, 'a refused client must not suppress the shopper');
    assert.match(err.message, /for a policy or login reason/);
  });

  it('over submission without the CA, the certificate is not trusted and nothing is sent', async () => {
    const to = uniqueEmail('untrusted');
    const err = await sendError(open(mail.submissionUrl), to);
    assert.match(err.message, /secure \(TLS\) connection to the mail server failed/);
    assert.deepEqual(await mail.messages(to), []);
  });

  it('with a CA, a server that offers no STARTTLS gets no login and no mail', async () => {
    const plain = await startSmtpSink({ auth: { user: 'shop', pass: 'secret' } });
    const transport = openMailTransport({ smtpUrl: plain.url, from: FROM, database: unusedDatabase, ca: mail.caPem });
    try {
      const err = await sendError(transport, uniqueEmail('no-starttls'));
      assert.match(err.message, /TLS/);
      assert.deepEqual(plain.refusedLogins, [], 'no AUTH was tried in clear text');
      assert.deepEqual(plain.messages, []);
    } finally {
      await transport.close();
      await plain.close();
    }
  });
});

describe('SMTP URLs are read into typed settings', () => {
  it('reads host, port, credentials and timeouts, with defaults', () => {
    assert.deepEqual(parseSmtpUrl('smtp://mail.example.com'), {
      secure: false,
      host: 'mail.example.com',
      port: 587,
      auth: undefined,
      clientName: undefined,
      connectionTimeoutMs: 10_000,
      greetingTimeoutMs: 10_000,
      socketTimeoutMs: 30_000,
    });
    assert.deepEqual(parseSmtpUrl('smtps://us%40er:p%3Ass%2Fw@[::1]:2465/?socketTimeout=5000&greetingTimeout=200&name=worker-1.example'), {
      secure: true,
      host: '::1',
      port: 2465,
      auth: { user: 'us@er', pass: 'p:ss/w' },
      clientName: 'worker-1.example',
      connectionTimeoutMs: 10_000,
      greetingTimeoutMs: 200,
      socketTimeoutMs: 5000,
    });
    assert.equal(parseSmtpUrl('smtps://mail.example.com').port, 465);
  });

  it('refuses every other option, a path, and timeouts that are not whole milliseconds, without echoing the URL', () => {
    const refused = [
      'smtp://user:secret@mail.example.com/?sendmail=true&path=/bin/sh',
      'smtp://user:secret@mail.example.com/?pool=false',
      'smtp://user:secret@mail.example.com/?tls.rejectUnauthorized=false',
      'smtp://user:secret@mail.example.com/?__proto__=x',
      'smtp://user:secret@mail.example.com/?connectionTimeout=1e3',
      'smtp://user:secret@mail.example.com/?name=a%20b',
      'smtp://user:secret@mail.example.com/?connectionTimeout=0',
      'smtp://user:secret@mail.example.com/?socketTimeout=9999999',
      'smtp://user:secret@mail.example.com/bin/sh',
      'smtp://user:secret@mail.example.com/#x',
      'smtp://user:%E0%A4%A@mail.example.com',
    ];
    for (const url of refused) {
      assert.throws(() => parseSmtpUrl(url), (err: Error) => err instanceof SmtpUrlError && !err.message.includes('secret'), url);
    }
  });

  it('SMTP_CA_FILE is read at start: a missing file or one without a certificate stops the service', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'restock-smtp-ca-'));
    try {
      const certificates = makeCertificates();
      try {
        assert.equal(loadConfig({ SMTP_CA_FILE: certificates.server.certFile }).smtpCa, certificates.server.cert);
      } finally {
        certificates.remove();
      }
      assert.equal(loadConfig({}).smtpCa, undefined);
      assert.throws(() => loadConfig({ SMTP_CA_FILE: path.join(dir, 'missing.pem') }), (err: Error) => err instanceof ConfigError && /SMTP_CA_FILE: cannot read .*missing\.pem \(ENOENT\)/.test(err.message));
      const notPem = path.join(dir, 'not.pem');
      writeFileSync(notPem, 'not a certificate');
      assert.throws(() => loadConfig({ SMTP_CA_FILE: notPem }), (err: Error) => err instanceof ConfigError && /SMTP_CA_FILE: .* holds no PEM certificate/.test(err.message));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('an operator SMTP_URL carrying library options is refused at start, not obeyed', () => {
    assert.throws(
      () => openMailTransport({ smtpUrl: 'smtp://localhost/?sendmail=true&path=/bin/sh&args=-c&args=exit', from: FROM, database: unusedDatabase }),
      /option "sendmail" is not supported/,
    );
  });
});

describe('mail over SMTP when the server is not there', () => {
  /** The longest timeout a URL may set, far past the test's own. */
  const NEVER = 600_000;
  // Every wait but the one under test is set to NEVER: a send left to one fails by timing out.
  const WAITING_FAILS = { timeout: 30_000 };

  async function sendError(transport: MailTransport): Promise<MailDeliveryError> {
    const err = await transport.send(message()).then(
      () => assert.fail('send resolved'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof MailDeliveryError, String(err));
    return err;
  }

  it('a closed port rejects the send on the refusal, not on a timeout', WAITING_FAILS, async () => {
    const transport = openMailTransport({
      smtpUrl: `smtp://127.0.0.1:${await freePort()}?connectionTimeout=${NEVER}&greetingTimeout=${NEVER}&socketTimeout=${NEVER}`,
      from: FROM,
      database: unusedDatabase,
    });
    try {
      const err = await sendError(transport);
      assert.match(err.message, /the mail server could not be reached/);
      assert.match(String((err.cause as Error).message), /ECONNREFUSED/);
    } finally {
      await transport.close();
    }
  });

  it('a server that accepts the connection but never greets rejects the send after greetingTimeout', WAITING_FAILS, async () => {
    const silent = await startSilentServer();
    const url = (greetingTimeout: number) =>
      `smtp://127.0.0.1:${silent.port}?greetingTimeout=${greetingTimeout}&connectionTimeout=${NEVER}&socketTimeout=${NEVER}`;
    // Connected first, with a longer greeting timeout: had the URL's value been ignored, both
    // would wait alike and this one would give up first.
    const patient = openMailTransport({ smtpUrl: url(NEVER), from: FROM, database: unusedDatabase });
    const hasty = openMailTransport({ smtpUrl: url(200), from: FROM, database: unusedDatabase });
    try {
      let patientSettled = false;
      const patientSend = patient.send(message()).finally(() => (patientSettled = true));
      patientSend.catch(() => {});
      await silent.connected(1);
      const err = await sendError(hasty);
      assert.match(err.message, /the mail server did not answer in time/);
      assert.match(String((err.cause as Error).message), /Greeting never received/);
      assert.equal(patientSettled, false, 'the send told to wait longer for the greeting still waits: the configured timeout decided');
    } finally {
      // Cutting the connections ends the patient send, which close() waits for.
      await silent.close();
      await patient.close();
      await hasty.close();
    }
  });

  it('a closed transport refuses to send', async () => {
    const sink = await startSmtpSink();
    const transport = openMailTransport({ smtpUrl: sink.url, from: FROM, database: unusedDatabase });
    await transport.send(message());
    await transport.close();
    await assert.rejects(transport.send(message()), /closed/);
    await sink.close();
    assert.equal(sink.messages.length, 1);
  });

  it('close waits for mails already handed over', async () => {
    const sink = await startSmtpSink();
    const transport = openMailTransport({ smtpUrl: sink.url, from: FROM, database: unusedDatabase });
    const sending = transport.send(message({ to: 'in-flight@example.com' }));
    await transport.close();
    await sending;
    await sink.close();
    assert.deepEqual(sink.messages.map((m) => m.recipients), [['in-flight@example.com']]);
  });
});
