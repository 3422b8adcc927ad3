import { describe, expect, it } from 'vitest';
import type { ReviewEvent } from '../../src/core/events.js';
import {
  bridgeForTest as bridge,
  initialLoadDone,
  simulatorForTest as simulator,
  sweepNow,
  testEnv,
} from '../helpers/bridge.js';
import { readAll } from '../helpers/kafka.js';
import { newRedis, uniqueName } from '../helpers/services.js';

// The test helpers' settings (no FINGERPRINT_KEY_FILE; FINGERPRINT_KEK_FILE wraps the generated key's changelog
// copy): the generated fingerprint key is lost with every other key of the
// deployment while no replica runs, and a review was edited meanwhile without moving its updated_date (only a sweep
// sees such an edit). The restarted bridge must compare the restored entries with the same key and publish the
// edit. Before the key was copied to the changelog, it generated a new key, could not compare the entries of the
// old one and adopted the edit without review.updated.

describe('a fingerprint key lost with Redis', () => {
  it('comes back from the changelog: an edit made while it was gone is published by the next sweep', async () => {
    const sim = await simulator({ reviewCount: 40, seed: 36 });
    // A prefix of its own: the key is shared by every bridge under a prefix, and this test deletes it.
    const prefix = uniqueName('fk');
    const b = await bridge(testEnv(sim.url, { REDIS_KEY_PREFIX: prefix }));
    await initialLoadDone(b);
    await b.app.stop();

    sim.control.edit(7, { headline: 'edited while the bridge was down' });
    const redis = newRedis();
    const lost = await redis.keys(`*${prefix}*`);
    expect(lost).toContain(`${prefix}:fingerprint-key`);
    await redis.del(...lost);

    await b.restart();
    await initialLoadDone(b);
    await sweepNow(b);
    const updated = await readAll([b.topics.updated], { timeoutMs: 20_000 });
    const events = updated.map((m) => JSON.parse(m.value) as ReviewEvent);
    expect(events.map((e) => [e.subject, e.data.changed_fields])).toEqual([['7', ['headline']]]);
  });
});
