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
