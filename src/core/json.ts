/** Text (or bytes, UTF-8) as JSON, or undefined when it is not JSON: for answers and deliveries from outside. */
export function jsonOf(text: string | Buffer): unknown {
  try {
    return JSON.parse(typeof text === 'string' ? text : text.toString('utf8'));
  } catch {
    return undefined;
  }
}
