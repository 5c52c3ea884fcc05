/**
 * What a fan-out makes for each message, against the plain way of making it: an alert compiled
 * once per product, language and kind renders what a one-pass fill renders, for any template and
 * values, however many shoppers it serves; the lists the worker binds into statements come in
 * power-of-two lengths and drop nothing; and the SMTP transport, which chooses each body part's
 * transfer encoding itself, puts on the wire the very bytes the mail library does when it
 * chooses.
 *
 *   RESTOCK_PROPERTY_RUNS=5000 npm test -- test/dispatch-messages.test.ts
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import nodemailer from 'nodemailer';
import { after, before, describe, it } from './fixtures/suites.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { propertyParams } from './fixtures/properties.ts';
import { startSmtpSink, type SmtpSink } from './fixtures/smtp-sink.ts';
import { SmtpTransport } from '../src/core/mail/smtp-transport.ts';
import { MAX_LIST, paddedLists, powerOfTwoLists } from '../src/dispatch/list-sizes.ts';
import { notificationRenderer, renderNotification, type NotificationContent } from '../src/dispatch/templates.ts';

failOnLeakedHandles();

const params = propertyParams(500);

const PLACEHOLDERS = ['shop', 'product_title', 'variant_title', 'variant_suffix', 'product_url', 'image_url', 'unsubscribe_url', 'manage_url', 'email', 'reserved_until', 'typo'];
const templatePiece = fc.oneof(
  fc.string({ maxLength: 8 }),
  fc.constantFrom(...PLACEHOLDERS).map((name) => `{{${name}}}`),
  fc.constantFrom(...PLACEHOLDERS).map((name) => `{{ ${name}  }}`),
  fc.constantFrom('{{', '}}', '{{ }}', '{{Shop}}', '<b>&"\'', '\r\n', 'é·’ 東京'),
);
const template = fc.array(templatePiece, { maxLength: 12 }).map((pieces) => pieces.join(''));
const value = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('{{email}}', '<a&b>', 'O\'Neil "x"', 'two\r\nlines', '£ é 東京'));
const content = fc.record({
  shop: value,
  productTitle: value,
  variantTitle: fc.option(value),
  productUrl: fc.option(value),
  imageUrl: fc.option(value),
  unsubscribeUrl: value,
  manageUrl: value,
  email: value,
  reservedUntil: fc.option(value),
});
const ownTemplate = fc.record({ subject: template, text: template, html: template }, { requiredKeys: [] });

describe('the alert compiled once for a fan-out', () => {
  it('renders for every shopper what a one-pass fill renders for that shopper', () => {
    fc.assert(
      fc.property(
        content,
        fc.array(content, { minLength: 1, maxLength: 3 }),
        fc.constantFrom('en', 'fr', 'de', 'es'),
        fc.constantFrom('alert', 'reminder'),
        ownTemplate,
        (product, shoppers, locale, kind, own) => {
          const settings = { locale, template: own } as const;
          for (const reserved of [false, true]) {
            const render = notificationRenderer(product, settings, kind, reserved);
            for (const shopper of shoppers) {
              const one: NotificationContent = { ...shopper, shop: product.shop, productTitle: product.productTitle, variantTitle: product.variantTitle, imageUrl: product.imageUrl, reservedUntil: reserved ? shopper.reservedUntil || 'soon' : null };
              assert.deepEqual(render(one), renderNotification(one, settings, kind));
            }
          }
        },
      ),
      params,
    );
  });

  it('leaves a name that only looks like a placeholder as written, in both ways of rendering', () => {
    const one: NotificationContent = { shop: 's', productTitle: 'P', variantTitle: null, productUrl: 'u', imageUrl: null, unsubscribeUrl: 'x', manageUrl: 'm', email: 'e' };
    const settings = { locale: 'en', template: { subject: '{{constructor}} {{__proto__}}', html: '<p>{{constructor}}</p>' } } as const;
    const compiled = notificationRenderer(one, settings)(one);
    assert.equal(compiled.subject, '{{constructor}} {{__proto__}}');
    assert.equal(compiled.html, '<p>{{constructor}}</p>');
    assert.deepEqual(compiled, renderNotification(one, settings));
  });
});

describe('lists bound into statements', () => {
  const isPowerOfTwo = (n: number) => n > 0 && (n & (n - 1)) === 0;
  const items = fc.array(fc.integer({ min: 0, max: 50 }), { maxLength: 1500 });

  it('padded: power-of-two lengths up to the most a statement binds, naming every item and nothing else', () => {
    fc.assert(
      fc.property(items, (list) => {
        const lists = [...paddedLists(list)];
        for (const one of lists) {
          assert.ok(isPowerOfTwo(one.length) && one.length <= MAX_LIST, `length ${one.length}`);
        }
        assert.deepEqual(new Set(lists.flat()), new Set(list));
        assert.equal(lists.length, Math.ceil(list.length / MAX_LIST));
      }),
      params,
    );
  });

  it('split: power-of-two lengths, longest first, each item once and in order', () => {
    fc.assert(
      fc.property(items, fc.constantFrom(MAX_LIST, 256, 7), (list, max) => {
        const lists = [...powerOfTwoLists(list, max)];
        assert.deepEqual(lists.flat(), list);
        for (const [i, one] of lists.entries()) {
          assert.ok(one.length <= max && (isPowerOfTwo(one.length) || one.length === max), `length ${one.length}`);
          if (i > 0) assert.ok(one.length <= lists[i - 1]!.length, 'longest first');
        }
      }),
      params,
    );
  });
});

describe('the transport choosing each body part\'s transfer encoding', () => {
  let sink: SmtpSink;
  let ours: SmtpTransport;
  let library: nodemailer.Transporter;
  before(async () => {
    sink = await startSmtpSink();
    ours = new SmtpTransport(sink.url, 'Restock <alerts@restock.test>', { poolSize: 1 });
    library = nodemailer.createTransport({ host: '127.0.0.1', port: sink.port, secure: false, ignoreTLS: true });
  });
  after(async () => {
    await ours.close();
    library.close();
    await sink.close();
  });

  /** The raw message with what differs on every send (date, message id, boundaries) masked. */
  const masked = (raw: string) =>
    raw
      .replace(/^Date: .*$/m, 'Date: -')
      .replace(/^Message-ID: .*$/m, 'Message-ID: -')
      .replace(/--_NmP-[0-9a-f]+-Part_\d+/g, '--boundary')
      .replace(/boundary="[^"]+"/g, 'boundary="-"');

  const built = (['en', 'fr', 'de', 'es'] as const).map((locale) =>
    renderNotification(
      { shop: 'shop.example', productTitle: 'Widget “Ü”', variantTitle: 'Blue / M', productUrl: `https://restock.example/r/${'a'.repeat(90)}`, imageUrl: 'https://cdn.example/w.png', unsubscribeUrl: 'https://restock.example/u', manageUrl: 'https://restock.example/m', email: 'shopper@example.com', reservedUntil: '3 May, 14:00 CEST' },
      { locale, template: {} },
    ),
  );
  const bodies: Array<{ what: string; text: string; html?: string }> = [
    ...built.map((content, i) => ({ what: `built-in alert ${i}`, text: content.text, html: content.html })),
    { what: 'plain and short (7bit)', text: 'Back in stock.\nShop now.' },
    { what: 'empty', text: '', html: '' },
    { what: 'mostly not Latin (base64)', text: '東京ストアの限定版マグカップが再入荷しました。'.repeat(4), html: '<p>東京</p>' },
    { what: 'ASCII with long lines and few letters', text: '1234567890 '.repeat(20), html: '9'.repeat(200) },
    { what: 'control characters', text: 'tab\there\u0001', html: 'é' },
    { what: 'over 128 kB', text: 'x'.repeat(130 * 1024) },
  ];

  for (const body of bodies) {
    it(`sends the bytes the library sends: ${body.what}`, async () => {
      const to = (who: string) => `${who}-${bodies.indexOf(body)}@example.com`;
      const mail = { subject: 'Sübject', text: body.text, ...(body.html !== undefined && { html: body.html }), headers: { 'X-Restock-Alert': 'ntf_1' } };
      await ours.send({ to: to('ours'), ...mail, purpose: 'restock-alert' });
      await library.sendMail({ from: 'Restock <alerts@restock.test>', to: { name: '', address: to('library') }, ...mail });
      const [a, b] = await Promise.all([sink.waitFor((m) => m.recipients.includes(to('ours'))), sink.waitFor((m) => m.recipients.includes(to('library')))]);
      assert.equal(masked(a.raw).replace(to('ours'), to('library')), masked(b.raw));
    });
  }
});
