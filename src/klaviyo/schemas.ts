import { z } from 'zod';

/** Klaviyo's private keys start `pk_` (https://developers.klaviyo.com/en/docs/authenticate_); public keys (site ids) are refused. */
export const klaviyoConnectionInput = z.object({
  privateApiKey: z
    .string()
    .regex(/^pk_[A-Za-z0-9_-]{16,100}$/, "must be a Klaviyo private API key (it starts with pk_); a public key cannot create events")
    .describe('A private API key of the Klaviyo account with the scopes accounts:read and events:write; checked with Klaviyo, kept sealed, never shown again'),
});

export type KlaviyoConnectionInput = z.infer<typeof klaviyoConnectionInput>;

export const klaviyoConnection = z
  .object({
    shop: z.string(),
    status: z.enum(['connected', 'disconnected']),
    keyHint: z.string().nullable().describe("The key's last four characters, to tell which key is connected"),
    accountId: z.string().nullable().describe('The Klaviyo account the key belongs to'),
    connectedAt: z.string(),
    disconnectedAt: z.string().nullable(),
    disconnectReason: z.string().nullable(),
    events: z.object({ pending: z.number().int(), delivered: z.number().int(), failed: z.number().int() }).describe("The store's events queued for Klaviyo, by what became of them"),
  })
  .describe("A store's Klaviyo connection; its key is never shown back");

export type KlaviyoConnection = z.infer<typeof klaviyoConnection>;
