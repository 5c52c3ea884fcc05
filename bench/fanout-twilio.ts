/**
 * The SMS side of bench/fanout.ts --mixed, in a process of its own: the project's Twilio stand-in
 * (test/fixtures/twilio-stand-in.ts: Twilio's Messages API with Basic auth, its checks and its
 * JSON, then the signed status callbacks `sent` and `delivered` posted back to the service, one
 * connection each, as Twilio posts them) on 127.0.0.1, counting each text the API accepted per
 * phase as the SMTP sink counts mail (bench/fanout-counter.ts). A text counts when the stand-in
 * has accepted it, just before its 201 goes out.
 *
 * Started with an IPC channel and FANOUT_TWILIO_SID, FANOUT_TWILIO_TOKEN, FANOUT_TWILIO_FROM
 * (the service's account). From the bench: the counter's { type: 'expect' | 'report' }, and
 * { type: 'settle' }: wait (at most 60 s) until every status callback started so far has been
 * answered, then answer { type: 'settled', ... } with how the service answered them. Exits when
 * the channel closes.
 */
import { startTwilioStandIn, type CallbackAttempt, type StandInMessage } from '../test/fixtures/twilio-stand-in.ts';
import { PhaseCounter, now, type CounterCommand, type CounterEvent } from './fanout-counter.ts';

export type TwilioCommand = CounterCommand | { type: 'settle' };

export interface CallbackStats {
  /** Status callbacks answered in this phase, by the service's HTTP status. */
  answers: Record<string, number>;
  /** Final-status callbacks (delivered) the service answered 2xx. */
  finalAnswered: number;
  lastAt: number | null;
  /** Callbacks still unanswered when the wait ended. */
  unsettled: boolean;
}

export type TwilioEvent = { type: 'ready'; url: string } | CounterEvent | ({ type: 'settled' } & CallbackStats);

function setting(name: string): string {
  const value = process.env[name];
  if (!value) {
    process.stderr.write(`fanout-twilio: ${name} is not set (start me from bench/fanout.ts)\n`);
    process.exit(2);
  }
  return value;
}

if (!process.send) {
  process.stderr.write('fanout-twilio: start me with an IPC channel (from bench/fanout.ts)\n');
  process.exit(2);
}

const send = (event: TwilioEvent) => void process.send?.(event);
const counter = new PhaseCounter(send);
const from = setting('FANOUT_TWILIO_FROM');
const standIn = await startTwilioStandIn([{ accountSid: setting('FANOUT_TWILIO_SID'), authToken: setting('FANOUT_TWILIO_TOKEN'), numbers: [from] }]);

let callbacks: CallbackStats = { answers: {}, finalAnswered: 0, lastAt: null, unsettled: false };

// The stand-in records each accepted text and each answered callback in a list; counting as they
// are recorded, the lists themselves are emptied (a long run would otherwise keep every text).
standIn.messages.push = (...items: StandInMessage[]) => {
  const at = now();
  for (const item of items) counter.record(item.to, at);
  return 0;
};
standIn.callbacks.push = (...items: CallbackAttempt[]) => {
  const at = now();
  for (const item of items) {
    const key = String(item.answer);
    callbacks.answers[key] = (callbacks.answers[key] ?? 0) + 1;
    if (item.params.MessageStatus === 'delivered' && item.answer >= 200 && item.answer < 300) callbacks.finalAnswered++;
    callbacks.lastAt = at;
  }
  return 0;
};

process.on('message', (command: TwilioCommand) => {
  if (command.type === 'expect') callbacks = { answers: {}, finalAnswered: 0, lastAt: null, unsettled: false };
  if (counter.command(command)) return;
  if (command.type === 'settle') {
    const limit = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), 60_000).unref());
    void Promise.race([standIn.settled().then(() => 'settled' as const), limit]).then((outcome) => {
      send({ type: 'settled', ...callbacks, unsettled: outcome === 'timeout' });
    });
  }
});
process.on('disconnect', () => {
  void Promise.race([standIn.close(), new Promise((resolve) => setTimeout(resolve, 2000))]).finally(() => process.exit(0));
});
send({ type: 'ready', url: standIn.url });
