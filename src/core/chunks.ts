/**
 * Splits a list into runs of at most `size`: statements naming many ids (`in (...)`, multi-row
 * inserts) stay under the databases' limits on bound parameters.
 */
export function* chunks<T>(items: readonly T[], size = 500): Generator<T[]> {
  for (let i = 0; i < items.length; i += size) yield items.slice(i, i + size);
}
