/**
 * Amounts as platforms write them ("19.99", "1500", "12.345") turned into integers of the
 * currency's minor unit and back, by string arithmetic: a float would turn 0.1 + 0.2 into
 * 0.30000000000000004 and, summed over many orders, a cent into a rounding error. And the same
 * amounts for people to read (`formatMinor`), with the same number of decimals per currency.
 */
import type { Money } from './reports.ts';

const FALLBACK_LOCALE = 'en';

const CURRENCY_CODE = /^[A-Z]{3}$/;
const DECIMAL = /^([0-9]+)(?:\.([0-9]+))?$/;

/** Digits after the decimal point in the currency (EUR 2, JPY 0, KWD 3), as ICU's currency data has them. */
export function currencyExponent(currency: string): number {
  if (!CURRENCY_CODE.test(currency)) throw new RangeError(`Not an ISO 4217 currency code: ${JSON.stringify(currency)}`);
  return new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2;
}

/**
 * "19.99" EUR → 1999, "1500" JPY → 1500, "12.345" KWD → 12345. Trailing zeros beyond the
 * currency's digits are accepted ("1500.00" JPY → 1500: the value is exact); any other digit
 * there, a sign, an exponent, spaces or an empty part is refused, as is a result past 2^53.
 */
export function toMinorUnits(decimal: string, currency: string): number {
  const exponent = currencyExponent(currency);
  const match = DECIMAL.exec(decimal);
  if (!match) throw new RangeError(`Not a decimal amount: ${JSON.stringify(decimal)} (${currency})`);
  const [, whole, fraction = ''] = match;
  if (/[^0]/.test(fraction.slice(exponent))) {
    throw new RangeError(`${JSON.stringify(decimal)} has more decimals than ${currency} has (${exponent})`);
  }
  const minor = Number(`${whole}${fraction.slice(0, exponent).padEnd(exponent, '0')}`);
  if (!Number.isSafeInteger(minor)) throw new RangeError(`${JSON.stringify(decimal)} ${currency} is too large to count exactly`);
  return minor;
}

/** The inverse: 1999 EUR → "19.99", 1500 JPY → "1500", 5 KWD → "0.005". */
export function fromMinorUnits(minor: number, currency: string): string {
  if (!Number.isSafeInteger(minor) || minor < 0) throw new RangeError(`Not a count of minor units: ${minor}`);
  const exponent = currencyExponent(currency);
  if (exponent === 0) return String(minor);
  const digits = String(minor).padStart(exponent + 1, '0');
  return `${digits.slice(0, -exponent)}.${digits.slice(-exponent)}`;
}

/**
 * 1999 EUR → "€19.99", 1500 JPY → "¥1,500" (in `en`; `de` gives "19,99 €"). The amount goes to
 * Intl as an exact decimal string, so large amounts are not rounded through a float. A locale
 * Intl cannot use (a browser's header, say) falls back to English rather than failing the page.
 */
export function formatMinor(money: Money, locale = FALLBACK_LOCALE): string {
  if (!Number.isSafeInteger(money.minor)) throw new RangeError(`not an integer amount of minor units: ${money.minor}`);
  const decimal = `${money.minor < 0 ? '-' : ''}${fromMinorUnits(Math.abs(money.minor), money.currency)}`;
  // Intl.NumberFormat v3 (Node 20) reads a string as an exact decimal; the lib types predate it.
  return new Intl.NumberFormat(usableLocale(locale), { style: 'currency', currency: money.currency }).format(decimal as unknown as number);
}

function usableLocale(locale: string): string {
  try {
    return Intl.NumberFormat.supportedLocalesOf([locale])[0] ?? FALLBACK_LOCALE;
  } catch {
    return FALLBACK_LOCALE;
  }
}
