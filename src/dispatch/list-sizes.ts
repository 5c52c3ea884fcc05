/**
 * Lists the worker binds into a statement (`in (?, ?, …)`, a multi-row insert) come in a few
 * sizes only: powers of two. Each length of a list is another statement text, and SQLite
 * prepares each text once and keeps it (the database caches a few hundred, then starts over).
 * A fan-out's claims and settled groups, each of its own length, made nearly every one a new
 * statement of up to hundreds of parameters, whose compiled program stays in native memory,
 * after the cache drops it, until a full collection of the heap finds its handle: megabytes per
 * thousand alerts, and the time to prepare each.
 */

/** The longest list bound at once: within both databases' limits on parameters. */
export const MAX_LIST = 512;

/** The smallest power of two at least `n` (n ≥ 1). */
function sizeFor(n: number): number {
  return 2 ** Math.ceil(Math.log2(n));
}

/**
 * `items` in lists of power-of-two lengths, for statements where an item named twice is the
 * same item (`where id in (…)`, a set of ids): the last list is filled up with its last item.
 */
export function* paddedLists<T>(items: readonly T[], max = MAX_LIST): Generator<T[]> {
  for (let i = 0; i < items.length; i += max) {
    const list = items.slice(i, i + max);
    const size = sizeFor(list.length);
    while (list.length < size) list.push(list[list.length - 1]!);
    yield list;
  }
}

/**
 * `items` split into lists of power-of-two lengths, longest first (137: 128, 8 and 1), for a
 * call that must see each item once: rows to insert, or another feature's query, which may
 * count or announce what it is given.
 */
export function* powerOfTwoLists<T>(items: readonly T[], max = MAX_LIST): Generator<T[]> {
  let i = 0;
  while (i < items.length) {
    const rest = items.length - i;
    const size = rest >= max ? max : 2 ** Math.floor(Math.log2(rest));
    yield items.slice(i, i + size);
    i += size;
  }
}

/** A set-valued lookup made list by list (powerOfTwoLists), its answers merged. */
export async function inListsOf<T, R>(items: readonly T[], lookup: (list: T[]) => Promise<Iterable<R>>): Promise<Set<R>> {
  const found = new Set<R>();
  for (const list of powerOfTwoLists(items)) for (const item of await lookup(list)) found.add(item);
  return found;
}
