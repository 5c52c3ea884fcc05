/**
 * Amounts as platforms write them ("19.99", "1500", "12.345") turned into integers of the
 * currency's minor unit and back, by string arithmetic: a float would turn 0.1 + 0.2 into
 * 0.30000000000000004 and, summed over many orders, a cent into a rounding error.
 */

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
