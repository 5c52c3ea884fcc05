import { z } from 'zod';
/** Web push from the PUSH_* settings (src/config.ts reads them). */
export interface PushConfig {
  /** The VAPID `sub` claim: how a push service reaches the operator (mailto: or https:). */
  subject: string;
  /** How long a push service keeps an alert for a browser that is offline. */
  ttlSeconds: number;
  /** The longest one exchange with a push service may take. */
  timeoutMs: number;
}

export type PushSettings = z.infer<z.ZodObject<typeof pushSettings>>;

export function pushConfig(e: PushSettings, mailFrom: string): PushConfig {
  const address = /<([^>]+)>/.exec(mailFrom)?.[1] ?? mailFrom;
  return { subject: e.PUSH_SUBJECT ?? `mailto:${address.trim()}`, ttlSeconds: e.PUSH_TTL_SECONDS, timeoutMs: e.PUSH_TIMEOUT_MS };
}

/** The web push settings: this module's slice of the environment, which src/config.ts reads with the rest. */
export const pushSettings = {
  PUSH_SUBJECT: z.string().regex(/^(mailto:[^\s]+|https:\/\/[^\s]+)$/, 'a mailto: or https: URL').optional().describe('Web push: the VAPID contact, `mailto:` or `https:` (unset: `mailto:` the `MAIL_FROM` address); see docs/push.md'),
  PUSH_TTL_SECONDS: z.coerce.number().int().min(0).max(28 * 24 * 3600).default(2 * 24 * 3600).describe('Web push: how long a push service keeps an alert for a browser that is offline'),
  PUSH_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000).describe('Web push: the longest one exchange with a push service may take'),
};
