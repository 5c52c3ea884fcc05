/**
 * The dashboard's sign-in from a stranger's side: planting a session of the attacker's store in a
 * victim's browser (finding 10), and spending the owner's sign-in mails so the owner cannot get
 * one (finding 12).
 */
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { MailOutboxRepository } from '../../src/core/mail/outbox-repository.ts';
import { after, before, describe, it } from '../fixtures/suites.ts';
import { uniqueDomain, uniqueEmail } from '../fixtures/agents.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from '../fixtures/app.ts';
import { failOnLeakedHandles } from '../fixtures/leaks.ts';

failOnLeakedHandles();

const FORM = { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' };

function postForm(t: TestApp, url: string, fields: Record<string, string>, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return t.app.inject({ method: 'POST', url, headers: { ...FORM, ...headers }, payload: new URLSearchParams(fields).toString() });
}

function cookieOf(res: LightMyRequestResponse, name: string): string | undefined {
  const line = [res.headers['set-cookie'] ?? []].flat().find((cookie) => cookie.startsWith(`${name}=`));
  return line?.split(';')[0];
}

async function signInMails(t: TestApp, owner: string): Promise<number> {
  const rows = await t.database.db.selectFrom('mail_outbox').select('id').where('recipient', '=', owner).where('purpose', '=', 'dashboard-sign-in').execute();
  return rows.length;
}

async function latestLink(t: TestApp, owner: string): Promise<string> {
  const mail = await new MailOutboxRepository(t.database).latestFor(owner, 'dashboard-sign-in');
  assert.ok(mail);
  return /http:\/\/restock\.test(\/dashboard\/sign-in\/[A-Za-z0-9_-]+)/.exec(mail.text)![1]!;
}

for (const dialect of testDialects()) {
  describe(`dashboard sign-in against strangers on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect);
    });
    after(() => t.close());

    async function newStore() {
      const shop = uniqueDomain('signin');
      const owner = uniqueEmail('owner');
      await t.app.restock.stores.createStore(shop, owner);
      return { shop, owner };
    }

    it('finding 10: a sign-in link posted from another site is not used and opens no session', async () => {
      const { shop, owner } = await newStore();
      await postForm(t, '/dashboard/sign-in', { shop });
      const link = await latestLink(t, owner);
      for (const crossSite of <Array<Record<string, string>>>[{ 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'same-site' }, { origin: 'https://attacker.example' }, { origin: 'null' }]) {
        const res = await postForm(t, link, {}, crossSite);
        assert.equal(res.statusCode, 403, JSON.stringify(crossSite));
        assert.equal(cookieOf(res, 'restock_dashboard'), undefined, 'no session planted');
      }
      const own = await postForm(t, link, {}, { 'sec-fetch-site': 'same-origin', origin: 'http://restock.test' });
      assert.equal(own.statusCode, 303, 'the link still works from our own page');
      assert.ok(cookieOf(own, 'restock_dashboard'));
    });

    it('finding 12: strangers spending the sign-in mails cannot lock out an owner on a browser they signed in from before', async () => {
      const { shop, owner } = await newStore();
      await postForm(t, '/dashboard/sign-in', { shop });
      const first = await postForm(t, await latestLink(t, owner), {});
      const device = cookieOf(first, 'restock_device');
      assert.ok(device, 'signing in marks the browser as the owner’s');

      const before = await signInMails(t, owner);
      for (let i = 0; i < 8; i++) await postForm(t, '/dashboard/sign-in', { shop });
      const spent = await signInMails(t, owner);
      assert.ok(spent - before <= 5, `strangers got at most the hourly budget: ${spent - before}`);

      await postForm(t, '/dashboard/sign-in', { shop });
      assert.equal(await signInMails(t, owner), spent, 'an unknown browser is still held to the budget');
      await postForm(t, '/dashboard/sign-in', { shop }, { cookie: device });
      assert.equal(await signInMails(t, owner), spent + 1, 'the owner’s own browser gets its link');
    });

    it('finding 12: a former owner’s browser is a stranger once the store changes hands', async () => {
      const { shop, owner } = await newStore();
      await postForm(t, '/dashboard/sign-in', { shop });
      const device = cookieOf(await postForm(t, await latestLink(t, owner), {}), 'restock_device')!;
      const next = uniqueEmail('next');
      await t.app.restock.stores.createStore(shop, next);
      for (let i = 0; i < 6; i++) await postForm(t, '/dashboard/sign-in', { shop });
      const spent = await signInMails(t, next);
      await postForm(t, '/dashboard/sign-in', { shop }, { cookie: device });
      assert.equal(await signInMails(t, next), spent, 'the former owner’s browser has no way around the budget');
    });
  });
}
