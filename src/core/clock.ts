/** The service's notion of now, as ISO-8601 UTC; one place to change for tests or skew. */
export function nowIso(): string {
  return new Date().toISOString();
}

export function isoAfter(ms: number, from: Date = new Date()): string {
  return new Date(from.getTime() + ms).toISOString();
}
