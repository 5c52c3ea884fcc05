import assert from 'node:assert/strict';
import { after, before, describe, it } from './fixtures/suites.ts';
import { Database } from '../src/core/db/database.ts';
import { MailOutboxRepository } from '../src/core/mail/outbox-repository.ts';
import { parseSmtpUrl, SmtpUrlError } from '../src/core/mail/smtp-url.ts';
import { MailDeliveryError, openMailTransport, type MailMessage, type MailTransport } from '../src/core/mail/transport.ts';
import { createTestDatabase, dialectSkip, testConfig, testDialects, type TestDatabase } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { freePort, startSilentServer } from './fixtures/network.ts';
import { startSmtpSink, type SmtpSink } from './fixtures/smtp-sink.ts';

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

  it('delivers subject, text, html, custom headers and the From address', async () => {
    // Long enough, and non-ASCII, so the text travels quoted-printable with soft line breaks.
    const text = `Bonjour, here is your claim code for the agent café-bot: 482915. It expires in ten minutes; ignore this mail if you did not ask.`;
    await transport.send(
      message({
        to: 'shopper@example.com',
        subject: 'Your claim code — Restock',
        text,
        html: '<p>Your code is <b>482915</b>.</p>',
        headers: { 'List-Unsubscribe': '<https://restock.test/unsubscribe/t1>', 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
      }),
    );
    // send() resolved, so the server has already accepted the mail.
    const got = sink.messages.find((m) => m.recipients.includes('shopper@example.com'));
    assert.ok(got, 'the sink has the mail once send resolves');
    assert.deepEqual(got.recipients, ['shopper@example.com']);
    assert.equal(got.envelopeFrom, 'alerts@restock.test');
    assert.equal(got.headers.from, FROM);
    assert.equal(got.headers.to, 'shopper@example.com');
    assert.equal(got.subject, 'Your claim code — Restock');
    assert.equal(got.headers['list-unsubscribe'], '<https://restock.test/unsubscribe/t1>');
    assert.equal(got.headers['list-unsubscribe-post'], 'List-Unsubscribe=One-Click');
    assert.equal(got.text.trim(), text);
    assert.match(got.text, /\b482915\b/);
    assert.equal(got.html?.trim(), '<p>Your code is <b>482915</b>.</p>');
    assert.match(got.raw, /^Content-Transfer-Encoding: quoted-printable$/m, 'the case the sink has to decode');
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
