import { z } from 'zod';

/** The words a shopper agreed to, as shown to them: kept as the record of their consent, whatever the channel. */
export const consentTextSchema = z.string().min(10).max(1000).describe('The consent wording shown to the shopper, stored as the record of their consent');
