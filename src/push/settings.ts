/** Web push from the PUSH_* settings (src/config.ts reads them). */
export interface PushConfig {
  /** The VAPID `sub` claim: how a push service reaches the operator (mailto: or https:). */
  subject: string;
  /** How long a push service keeps an alert for a browser that is offline. */
  ttlSeconds: number;
  /** The longest one exchange with a push service may take. */
  timeoutMs: number;
}

export interface PushSettings {
  PUSH_SUBJECT?: string;
  PUSH_TTL_SECONDS: number;
  PUSH_TIMEOUT_MS: number;
}

export function pushConfig(e: PushSettings, mailFrom: string): PushConfig {
  const address = /<([^>]+)>/.exec(mailFrom)?.[1] ?? mailFrom;
  return { subject: e.PUSH_SUBJECT ?? `mailto:${address.trim()}`, ttlSeconds: e.PUSH_TTL_SECONDS, timeoutMs: e.PUSH_TIMEOUT_MS };
}
