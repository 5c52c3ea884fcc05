import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { sendProblem, toProblem } from '../core/http/errors.ts';
import { Forbidden, Problem, ValidationFailed } from '../core/problems.ts';
import type { SmsAccount } from './schemas.ts';
import { loadTwilio } from './twilio-client.ts';
import { shopSchema } from '../stores/schemas.ts';
import type { SmsWebhooks } from './inbound.ts';
import { inboundFields, statusFields, type FormFields } from './schemas.ts';

/** Twilio's inbound posts carry a 1,600-character body (up to 4 bytes a character, escaped) and some forty short fields. */
export const SMS_WEBHOOK_BODY_LIMIT = 64 * 1024;

/**
 * Twilio's webhooks: `/sms/twilio/inbound` and `/sms/twilio/status` for the service's account,
 * the same with `/:domain` for a store that texts from its own. Each is a signed form post,
 * checked with the SDK against the URL Twilio was given (`BASE_URL` and the path) and the
 * auth token of the account the path names, before anything in it is believed. An inbound
 * text is answered with TwiML; a status callback with 204. What a store's own account sends
 * acts on that store's sender and records alone (SmsWebhooks).
 */
export function smsRoutes(options: { webhooks: SmsWebhooks; baseUrl: string }) {
  const { webhooks, baseUrl } = options;

  /** The request's fields once X-Twilio-Signature proves the account the path names sent them. */
  async function verified(request: FastifyRequest, domain: string | undefined): Promise<{ account: SmsAccount; fields: FormFields }> {
    const account = await webhooks.signingAccount(domain);
    if (!account) throw new Forbidden('No Twilio account signs webhooks for this address, so nothing sent to it can be verified.');
    const fields = (request.body ?? {}) as FormFields;
    const signature = request.headers['x-twilio-signature'];
    const twilio = await loadTwilio();
    if (typeof signature !== 'string' || !twilio.validateRequest(account.authToken, signature, baseUrl + request.url, fields)) {
      throw new Forbidden('X-Twilio-Signature is missing or does not match this request. Nothing was recorded.');
    }
    if (fields.AccountSid !== account.accountSid) throw new Forbidden('The request names another Twilio account than the one whose token signed it.');
    return { account, fields };
  }

  async function inbound(request: FastifyRequest, reply: FastifyReply, domain: string | undefined) {
    const { account, fields } = await verified(request, domain);
    const text = readFields(inboundFields, fields);
    const answer = await webhooks.inbound(
      { accountSid: text.AccountSid, from: text.From, to: text.To, body: text.Body, messagingServiceSid: text.MessagingServiceSid },
      { storeDomain: domain, account },
    );
    const twiml = new (await loadTwilio()).twiml.MessagingResponse();
    if (answer !== undefined) twiml.message(answer);
    return reply.code(200).type('text/xml; charset=utf-8').send(twiml.toString());
  }

  async function status(request: FastifyRequest, reply: FastifyReply, domain: string | undefined) {
    const { account, fields } = await verified(request, domain);
    const report = readFields(statusFields, fields);
    await webhooks.statusReport(
      {
        messageSid: report.MessageSid,
        status: report.MessageStatus,
        errorCode: report.ErrorCode,
        from: report.From,
        to: report.To,
        messagingServiceSid: report.MessagingServiceSid,
        notificationId: notificationOf(request),
      },
      { storeDomain: domain, account },
    );
    return reply.code(204).send();
  }

  return async function (app: FastifyInstance) {
    // Twilio posts forms; the fields are kept exactly as signed (see twilioForm).
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: SMS_WEBHOOK_BODY_LIMIT }, (_request, body, done) =>
      done(null, twilioForm(body as string)),
    );
    app.setErrorHandler((err: FastifyError, request, reply) => {
      const problem =
        err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE'
          ? new Problem('unsupported-media-type', 'Twilio webhooks are form posts: this address takes application/x-www-form-urlencoded only.')
          : toProblem(err, SMS_WEBHOOK_BODY_LIMIT);
      if (problem.status >= 500) request.log.error({ err }, 'Twilio webhook failed');
      return sendProblem(request, reply, problem, baseUrl);
    });

    const route = { bodyLimit: SMS_WEBHOOK_BODY_LIMIT, schema: { hide: true } };
    app.post('/sms/twilio/inbound', route, async (request, reply) => inbound(request, reply, undefined));
    app.post('/sms/twilio/inbound/:domain', route, async (request, reply) => inbound(request, reply, storeOf(request)));
    app.post('/sms/twilio/status', route, async (request, reply) => status(request, reply, undefined));
    app.post('/sms/twilio/status/:domain', route, async (request, reply) => status(request, reply, storeOf(request)));
  };
}

/** A ledger id as we put it in the callback URL; a report without one touches no ledger row. */
const NOTIFICATION_ID = /^ntf_[0-9a-z]{26}$/;

function notificationOf(request: FastifyRequest): string | undefined {
  const id = (request.query as { alert?: unknown }).alert;
  return typeof id === 'string' && NOTIFICATION_ID.test(id) ? id : undefined;
}

/**
 * The store a path names. One that is not a store domain has no account to verify with: it is
 * refused the way a wrong signature is, before its body is looked at.
 */
function storeOf(request: FastifyRequest): string {
  const parsed = shopSchema.safeParse((request.params as { domain?: string }).domain?.toLowerCase());
  if (!parsed.success) throw new Forbidden('No Twilio account signs webhooks for this address, so nothing sent to it can be verified.');
  return parsed.data;
}

/**
 * Form fields as Twilio signed them: empty values kept (Twilio signs its empty FromCity and the
 * like, and the app's own form parser drops them) and repeated names kept as lists.
 */
export function twilioForm(body: string): FormFields {
  const fields: FormFields = Object.create(null) as FormFields;
  for (const [name, value] of new URLSearchParams(body)) {
    const earlier = fields[name];
    fields[name] = earlier === undefined ? value : [...(Array.isArray(earlier) ? earlier : [earlier]), value];
  }
  return fields;
}

function readFields<S extends z.ZodType>(schema: S, fields: FormFields): z.infer<S> {
  const parsed = schema.safeParse(fields);
  if (parsed.success) return parsed.data;
  throw new ValidationFailed(parsed.error.issues.map((issue) => ({ pointer: `/body/${issue.path.join('/')}`, message: issue.message })));
}
