import type { z } from 'zod';

/**
 * A module's slice of the environment, brought by its registry entry (a channel's, a platform's)
 * so that src/config.ts parses it with the rest (and `.env.example` and the README's table list
 * it) without naming it, and what the module makes of the values, handed back to it as
 * `config.channels.<name>` or `config.platforms.<name>`, typed from its registry.
 */
export interface SettingsSlice<Slice extends z.ZodRawShape, Read> {
  readonly slice: Slice;
  /** Its values, parsed by the slice. Throws an Error saying what is wrong, which stops the start like any bad setting. */
  read(values: z.infer<z.ZodObject<Slice>>, service: ServiceSettings): Read;
}

/** The service's own settings a module's reading may lean on. */
export interface ServiceSettings {
  /** The sender of the service's mail (`MAIL_FROM`). */
  mailFrom: string;
  /** `RESTOCK_ENCRYPTION_KEY`, which whatever keeps stores' credentials needs. */
  encryptionKey: string | undefined;
}

/** Any module's slice, as a contract holds it; the registries keep each one's own types. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each module's `read` takes its own slice's values
export type AnySlice = SettingsSlice<any, unknown>;

/** A registry's modules with their slices, by name (a module with no settings has none). */
export type NamedSlices = ReadonlyArray<readonly [name: string, slice: AnySlice | undefined]>;

/** Every slice's fields, in the registry's order: src/config.ts parses them with its own. */
export function sliceFields(slices: NamedSlices): z.ZodRawShape {
  return Object.assign({}, ...slices.map(([, slice]) => slice?.slice ?? {}));
}

/** Each module's reading of its slice, by name (`values`: the parsed environment). */
export function readSlices(slices: NamedSlices, values: Record<string, unknown>, service: ServiceSettings): Record<string, unknown> {
  return Object.fromEntries(slices.flatMap(([name, slice]) => (slice ? [[name, slice.read(values, service)] as const] : [])));
}
