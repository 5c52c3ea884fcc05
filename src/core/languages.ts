/**
 * The languages the service speaks to shoppers and merchants: every string table (alert mail,
 * texts, push, the shopper's page, the widget's choices) has one entry per language here, and a
 * store's `locale` setting names one of them.
 */
export const LANGUAGES = ['en', 'fr', 'de', 'es'] as const;
export type Language = (typeof LANGUAGES)[number];
