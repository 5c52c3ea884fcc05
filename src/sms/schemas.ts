import { z } from 'zod';

/** A Twilio account and the sender its texts come from: the store's own, or the service's. */
export interface SmsAccount {
  accountSid: string;
  authToken: string;
  /** An E.164 number, or a Messaging Service SID (MG…). */
  from: string;
}

/**
 * The fields of Twilio's webhooks we read. Twilio adds fields without notice
 * (https://www.twilio.com/docs/messaging/guides/webhook-request), so the rest are let through:
 * they count for the signature, not for us.
 */
const accountSid = z.string().regex(/^AC[0-9a-f]{32}$/, 'must be an Account SID');
const messageSid = z.string().regex(/^(SM|MM)[0-9a-f]{32}$/, 'must be a Message SID');
/** Twilio leaves a field empty rather than out at times; empty says nothing. */
const optional = <T extends z.ZodType>(schema: T) => z.preprocess((value) => (value === '' ? undefined : value), schema.optional());
const address = z.string().min(1).max(64);

/** "A message comes in": https://www.twilio.com/docs/messaging/guides/webhook-request */
export const inboundFields = z.looseObject({
  AccountSid: accountSid,
  MessageSid: messageSid,
  From: address,
  To: address,
  Body: z.string().max(10_000).default(''),
  MessagingServiceSid: optional(z.string().regex(/^MG[0-9a-f]{32}$/, 'must be a Messaging Service SID')),
});

/** A status callback: https://www.twilio.com/docs/messaging/guides/track-outbound-message-status */
export const statusFields = z.looseObject({
  AccountSid: accountSid,
  MessageSid: messageSid,
  MessageStatus: z.string().min(1).max(32),
  ErrorCode: optional(z.string().regex(/^[0-9]{1,6}$/, 'must be a Twilio error code')),
  From: optional(address),
  To: optional(address),
  MessagingServiceSid: optional(z.string().regex(/^MG[0-9a-f]{32}$/, 'must be a Messaging Service SID')),
});

/** A form post's fields, as signed: every value, empty ones too, repeated names as lists. */
export type FormFields = Record<string, string | string[]>;
