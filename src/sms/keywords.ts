/**
 * The replies Twilio acts on by default on long codes and toll-free numbers, as its Advanced
 * Opt-Out guide lists them today: https://www.twilio.com/docs/messaging/tutorials/advanced-opt-out
 * (REVOKE and OPTOUT were added on 14 May 2025 for the FCC's rule:
 * https://www.twilio.com/en-us/blog/update-to-fcc-s-sms-opt-out-keywords). Only a message that is
 * the keyword alone counts: "STOP please" stops nothing, at Twilio or here. Twilio blocks the
 * sender for an opt-out before our webhook hears of it; we keep the same list so that what we
 * record agrees with what Twilio will refuse (error 21610).
 */

export type KeywordKind = 'opt-out' | 'opt-in' | 'help';

export const OPT_OUT_KEYWORDS = ['STOP', 'STOPALL', 'UNSUBSCRIBE', 'CANCEL', 'END', 'QUIT', 'REVOKE', 'OPTOUT'] as const;
/** YES is also the reply that confirms a double opt-in. */
export const OPT_IN_KEYWORDS = ['START', 'YES', 'UNSTOP'] as const;
export const HELP_KEYWORDS = ['HELP', 'INFO'] as const;

/** The reply that confirms a pending SMS subscription. */
export const CONFIRMATION_KEYWORD = 'YES';

const KINDS = new Map<string, KeywordKind>([
  ...OPT_OUT_KEYWORDS.map((word) => [word, 'opt-out'] as const),
  ...OPT_IN_KEYWORDS.map((word) => [word, 'opt-in'] as const),
  ...HELP_KEYWORDS.map((word) => [word, 'help'] as const),
]);

export interface InboundKeyword {
  kind: KeywordKind;
  /** The keyword, upper case. */
  word: string;
}

/** The keyword a whole inbound message is, ignoring case and surrounding white space; undefined for any other text. */
export function classifyInbound(body: string): InboundKeyword | undefined {
  const word = body.trim().toUpperCase();
  const kind = KINDS.get(word);
  return kind ? { kind, word } : undefined;
}
