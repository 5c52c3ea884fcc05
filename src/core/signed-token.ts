import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Tokens of the form `<subject>.<mac>` for links sent to people. The MAC binds the subject to a
 * purpose, so a token made for one kind of link is useless for another.
 */
export class TokenSigner {
  constructor(private readonly secret: Buffer) {}

  sign(purpose: string, subject: string): string {
    return `${subject}.${this.mac(purpose, subject)}`;
  }

  /** The subject when the token is genuine and made for this purpose; otherwise undefined. */
  verify(purpose: string, token: string): string | undefined {
    const dot = token.lastIndexOf('.');
    if (dot <= 0) return undefined;
    const subject = token.slice(0, dot);
    // Compare the text, not decoded bytes: base64url decoding ignores stray characters and
    // spare bits, which would let altered tokens pass.
    const given = Buffer.from(token.slice(dot + 1), 'utf8');
    const expected = Buffer.from(this.mac(purpose, subject), 'utf8');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    return subject;
  }

  private mac(purpose: string, subject: string): string {
    return createHmac('sha256', this.secret).update(`${purpose}\n${subject}`).digest('base64url');
  }
}
