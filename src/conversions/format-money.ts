/**
 * Money for people to read. Amounts are integers of the currency's minor unit; the number of
 * digits after the decimal point (the exponent) is the one the runtime's Intl data (CLDR) gives
 * the currency: 2 for EUR, 0 for JPY, 3 for KWD.
 */
import type { Money } from './reports.ts';

const FALLBACK_LOCALE = 'en';

/** Digits after the decimal point for a currency, as Intl formats it (EUR 2, JPY 0, KWD 3). */
export function minorUnitExponent(currency: string): number {
  return currencyFormat(FALLBACK_LOCALE, currency).resolvedOptions().maximumFractionDigits ?? 2;
}

/**
 * 1999 EUR → "€19.99", 1500 JPY → "¥1,500" (in `en`; `de` gives "19,99 €"). The amount goes to
 * Intl as an exact decimal string, so large amounts are not rounded through a float. A locale
 * Intl cannot use (a browser's header, say) falls back to English rather than failing the page.
 */
export function formatMinor(money: Money, locale = FALLBACK_LOCALE): string {
  if (!Number.isSafeInteger(money.minor)) throw new RangeError(`not an integer amount of minor units: ${money.minor}`);
  const format = currencyFormat(usableLocale(locale), money.currency);
  const decimal = decimalOf(money.minor, minorUnitExponent(money.currency));
  // Intl.NumberFormat v3 (Node 20) reads a string as an exact decimal; the lib types predate it.
  return format.format(decimal as unknown as number);
}

function currencyFormat(locale: string, currency: string): Intl.NumberFormat {
  // A malformed code would be a RangeError from Intl anyway; say what it was.
  if (!/^[A-Z]{3}$/.test(currency)) throw new RangeError(`not an ISO 4217 currency code: ${JSON.stringify(currency)}`);
  return new Intl.NumberFormat(locale, { style: 'currency', currency });
}

function usableLocale(locale: string): string {
  try {
    return Intl.NumberFormat.supportedLocalesOf([locale])[0] ?? FALLBACK_LOCALE;
  } catch {
    return FALLBACK_LOCALE;
  }
}

/** 1999 with exponent 2 → "19.99"; -5 → "-0.05"; 1500 with exponent 0 → "1500". */
function decimalOf(minor: number, exponent: number): string {
  const digits = Math.abs(minor).toString().padStart(exponent + 1, '0');
  const sign = minor < 0 ? '-' : '';
  if (exponent === 0) return sign + digits;
  return `${sign}${digits.slice(0, -exponent)}.${digits.slice(-exponent)}`;
}
