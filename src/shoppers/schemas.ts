import { z } from 'zod';
import { CHANNEL_NAMES } from '../channels.ts';

/** Any text: a token of the wrong shape is answered like a forged one (404), not as a 400 that tells the two apart. */
export const tokenParams = z.object({ token: z.string() });

const subscriptionId = z.string().regex(/^[A-Za-z0-9_-]{1,100}$/, 'must be a subscription id from this page').optional().describe('One subscription; absent: all of them');

/** The page's "cancel this alert" and "cancel all" forms. */
export const cancelForm = z.object({ subscription: subscriptionId }).strict();

/** The page's channel switches: one subscription's, or every subscription's. */
export const channelForm = z
  .object({
    channel: z.enum(CHANNEL_NAMES),
    on: z.enum(['1', '0']).describe('1: turn on; 0: turn off'),
    subscription: subscriptionId,
  })
  .strict();

/** The erase button posts nothing. */
export const eraseForm = z.object({}).strict();
