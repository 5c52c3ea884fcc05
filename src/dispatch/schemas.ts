import { z } from 'zod';
import { emailSchema } from '../core/email.ts';

export const ledgerStatusSchema = z.enum(['queued', 'sending', 'sent', 'skipped', 'failed']);

export const alertQueueSchema = z
  .object({
    waiting: z
      .array(z.object({ productId: z.string(), variantId: z.string().nullable(), waiting: z.number() }))
      .describe('Subscribers waiting for a restock, per product and variant'),
    totalWaiting: z.number(),
    alerts: z.record(ledgerStatusSchema, z.number()).describe('Alerts in the ledger per status'),
    heldByPlan: z.number().describe("Queued alerts held back by the store's plan (allowance used up, or the plan needs the store's own SMTP server); kept, never dropped"),
    restocks: z.array(
      z.object({
        restockId: z.string(),
        productId: z.string(),
        variantId: z.string().nullable(),
        status: z.enum(['dispatching', 'done', 'sold_out', 'unpublished', 'stopped']),
        availableAtDetection: z.number(),
        batches: z.number(),
        planned: z.number().describe('Alerts planned so far'),
        detectedAt: z.string(),
        nextBatchAt: z.string().nullable(),
        stopReason: z.string().nullable(),
        source: z.string(),
      }),
    ),
  })
  .describe('Alert queue lengths: who waits, what is queued and sent, and the restocks in progress');

export type AlertQueue = z.input<typeof alertQueueSchema>;

export const notificationSchema = z.object({
  notificationId: z.string(),
  restockId: z.string(),
  subscriptionId: z.string(),
  email: z.string(),
  productId: z.string(),
  variantId: z.string().nullable(),
  batch: z.number(),
  status: ledgerStatusSchema,
  reason: z.string().describe('Why the alert was sent: the restock, the batch policy and the subscriber’s place in line'),
  outcome: z.string().nullable().describe('What happened: accepted, the mail server’s refusal, or why it was skipped'),
  attempts: z.number(),
  createdAt: z.string(),
  sentAt: z.string().nullable(),
});

export const notificationsQuery = z
  .object({
    status: ledgerStatusSchema.optional(),
    restockId: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/).optional(),
    limit: z.coerce.number().int().min(1).max(1000).default(100),
  })
  .strict();

export const notificationsResponse = z.object({ items: z.array(notificationSchema) }).describe('The alert ledger, newest first');

export const suppressionSchema = z.object({
  email: z.string(),
  reason: z.enum(['bounce', 'complaint', 'manual']),
  detail: z.string().nullable(),
  createdAt: z.string(),
});

export const suppressBody = z
  .object({
    email: emailSchema,
    reason: z.enum(['complaint', 'bounce', 'manual']).describe('complaint: a spam report from a feedback loop; bounce: a hard bounce; manual: the merchant’s choice'),
    detail: z.string().max(500).optional(),
  })
  .strict();

export const suppressionParams = z.object({
  domain: z.string(),
  email: emailSchema,
});

export const suppressionsResponse = z.object({ items: z.array(suppressionSchema) });

export const outboxResponse = z
  .object({
    items: z.array(
      z.object({
        id: z.string(),
        to: z.string(),
        subject: z.string(),
        text: z.string(),
        html: z.string().optional(),
        headers: z.record(z.string(), z.string()),
        purpose: z.string(),
        createdAt: z.string(),
      }),
    ),
  })
  .describe('Mail kept in the local outbox for this store (embedded mode, when no SMTP server is set)');
