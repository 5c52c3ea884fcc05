/**
 * The channel registry (`src/channels.ts`) is the one list of channels: each channel it lists is
 * offered wherever the code offers channels, and each definition has every piece the code reads
 * of it. A channel added to the registry and forgotten somewhere fails here.
 */
import assert from 'node:assert/strict';
import { z } from 'zod';
import { CHANNEL_NAMES, CHANNELS, CONFIRMED_CHANNELS, CONTACT_CHANNELS, contactPointKind } from '../src/channels.ts';
import { performanceResponse } from '../src/conversions/schemas.ts';
import { channelForm } from '../src/shoppers/schemas.ts';
import { STRINGS } from '../src/shoppers/strings.ts';
import { availabilityResponse, shopperSubscribeResponse } from '../src/storefront/schemas.ts';
import { describe, it } from './fixtures/suites.ts';

const sorted = (names: Iterable<string>) => [...names].sort();

describe('the channel registry', () => {
  it('lists each channel once, and each provider has the words, the confirmation and the opt-out the code reads', () => {
    assert.deepEqual(sorted(new Set(CHANNEL_NAMES)), sorted(Object.keys(CHANNELS)));
    for (const name of CHANNEL_NAMES) {
      const provider = CHANNELS[name];
      assert.match(provider.words, /^by \S/, `${name}: how a ledger row says it went`);
      assert.ok(['link', 'reply', 'none'].includes(provider.confirmation), `${name}: its confirmation`);
      assert.ok(['link', 'words'].includes(provider.optOut), `${name}: its opt-out`);
    }
  });

  it("gives every channel with a contact point the device it reaches, how it starts, and a details schema that refuses what does not fit", () => {
    assert.ok(CONTACT_CHANNELS.length > 0);
    for (const name of CONTACT_CHANNELS) {
      const kind = contactPointKind(name);
      assert.match(kind.device, /^[a-z]+$/, `${name}: what the pages call it`);
      assert.ok(['pending', 'active'].includes(kind.startsAs), `${name}: how it starts`);
      assert.ok(kind.details instanceof z.ZodType, `${name}: its details schema`);
      assert.equal(kind.details.safeParse({ unknown: 'field' }).success, false, `${name}: its details take nothing they do not know`);
    }
  });

  it("is offered wherever the code offers channels: the shopper's page, the performance figures, the storefront's answers", () => {
    assert.deepEqual(sorted(channelForm.shape.channel.options), sorted(CHANNEL_NAMES), "the shopper's page switches every channel");
    assert.deepEqual(sorted(performanceResponse.shape.byChannel.element.shape.channel.options), sorted(CHANNEL_NAMES), 'the figures count every channel');
    assert.deepEqual(sorted(Object.keys(availabilityResponse.shape.channels.shape)), sorted(CONTACT_CHANNELS), 'the widget is told of every channel beside e-mail');
    assert.deepEqual(sorted(shopperSubscribeResponse.shape.confirmBy.element.options), sorted(CONFIRMED_CHANNELS), 'the widget is told of every confirmation still to come');
    for (const [language, strings] of Object.entries(STRINGS)) {
      assert.deepEqual(sorted(Object.keys(strings.channelName)), sorted(CHANNEL_NAMES), `the shopper's page names every channel in ${language}`);
    }
  });
});
