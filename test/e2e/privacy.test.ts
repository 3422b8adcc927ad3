import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ReviewEvent } from '../../src/core/events.js';
import { EMAIL_PATTERN } from '../../src/core/field-policy.js';
import {
  bridgeForTest as bridge,
  initialLoadDone,
  simulatorForTest as simulator,
  sweepNow,
  testEnv,
  type TestBridge,
} from '../helpers/bridge.js';
import { readAll, type ReadMessage } from '../helpers/kafka.js';
import { schemaErrors } from '../helpers/schemas.js';

// The personal-data policy end to end: the simulator's reviews carry e-mail addresses (85 % of them), the
// bridge runs with default settings, and every topic it writes, dead letters included, is read back raw.

const allTopics = (b: TestBridge) => Object.values(b.topics);
const emailIn = (text: string) => text.match(new RegExp(EMAIL_PATTERN.source, 'g')) ?? [];

/**
 * No record carries an e-mail address. Changelog entries are binary (the keyed fingerprints of
 * src/core/snapshot-entry.ts, fixed layout, no text): their random bytes may by chance read as an address (seen in
 * CI: "t\ufffdd@o\ufffd\u0006.tW"), so only the text records are scanned; an entry is held to its size instead,
 * which leaves no room for a review's text.
 */
function expectNoEmail(messages: ReadMessage[], b: TestBridge): void {
  const entry = (m: ReadMessage) => m.topic === b.topics.changelog && /(^|:)e:\d+$/.test(m.key ?? '');
  for (const m of messages.filter(entry)) expect(m.value.length).toBeLessThanOrEqual(128);
  for (const m of messages.filter((x) => !entry(x))) {
    expect(emailIn(m.value), `${m.topic}: ${m.value.slice(0, 300)}`).toEqual([]);
  }
}

/** The change events among the records read (the other topics are scanned for e-mail addresses all the same). */
function eventsOf(messages: ReadMessage[], b: TestBridge): ReviewEvent[] {
  const change = new Set([b.topics.created, b.topics.statusChanged, b.topics.updated]);
  return messages
    .filter((m) => change.has(m.topic))
    .map((m) => {
      const event = JSON.parse(m.value) as ReviewEvent;
      expect(schemaErrors(event)).toEqual([]);
      return event;
    });
}

describe('personal data', () => {
  it('with default settings no event and no dead letter carries an e-mail address', async () => {
    const n = 300;
    const sim = await simulator({ reviewCount: n, seed: 21, faults: { malformedRate: 0.03 } });
    const withEmail = [...Array(n).keys()].filter((i) => typeof sim.control.get(i + 1)?.email === 'string').length;
    expect(withEmail).toBeGreaterThan(n / 2);
    const b = await bridge(testEnv(sim.url));
    await initialLoadDone(b);
    // An e-mail edit and one inside free text, found by a sweep.
    sim.control.edit(3, { email: 'changed.three@example.com', comments: 'mail me: someone.else@example.org' });
    await sweepNow(b);
    const messages = await readAll(allTopics(b), { idleMs: 1_000, timeoutMs: 20_000 });
    const dead = messages.filter((m) => m.topic === b.topics.deadLetter);
    expect(dead.length).toBeGreaterThan(0);
    expect(messages.length).toBeGreaterThan(n);
    expectNoEmail(messages, b);
    const events = eventsOf(messages, b);
    // Absent, or null where the upstream sent null.
    expect(events.every((e) => (e.data.review.email ?? null) === null)).toBe(true);
    const edit = events.find((e) => e.subject === '3' && e.type === 'review.updated');
    expect(edit?.data.changed_fields).toEqual(expect.arrayContaining(['email', 'comments']));
    expect(edit?.data.review.comments).toBe('mail me: (email)');
    // The state topic carries the review under the same policy.
    expect(messages.some((m) => m.topic === b.topics.state && m.value.includes('"review"'))).toBe(true);
    // Masked dead letters keep what is not personal data.
    const body = JSON.parse(dead[0]!.value) as { record: Record<string, unknown> };
    expect(Object.keys(body.record)).toContain('client_publication_status');
  });

  it('with a hash key the e-mail is one token in every event of a review, and a changed address is detected', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'privacy-'));
    const keyFile = join(dir, 'hash-key');
    writeFileSync(keyFile, 'a-test-key-of-at-least-thirty-two-bytes\n');
    const sim = await simulator({ reviewCount: 60, seed: 22 });
    const id = [...Array(60).keys()].map((i) => i + 1).find((i) => typeof sim.control.get(i)?.email === 'string')!;
    const b = await bridge(testEnv(sim.url, { EVENT_HASH_KEY_FILE: keyFile }));
    await initialLoadDone(b);
    sim.control.setStatus(id, { client: 'REJECTED', pwr: 'REJECTED' });
    await readAll([b.topics.statusChanged], { untilCount: 1, timeoutMs: 15_000 });
    sim.control.edit(id, { email: 'moved@example.net' });
    await sweepNow(b);
    const messages = await readAll(allTopics(b), { idleMs: 1_000, timeoutMs: 20_000 });
    expectNoEmail(messages, b);
    const mine = eventsOf(messages, b)
      .filter((e) => e.subject === String(id))
      .sort((x, y) => x.sequence - y.sequence);
    expect(mine.map((e) => e.type)).toEqual(['review.created', 'review.status_changed', 'review.updated']);
    const [created, status, updated] = mine;
    expect(created!.data.review.email).toMatch(/^hmac-sha256:[0-9a-f]{64}$/);
    expect(status!.data.review.email).toBe(created!.data.review.email);
    expect(updated!.data.changed_fields).toEqual(['email']);
    expect(updated!.data.review.email).toMatch(/^hmac-sha256:[0-9a-f]{64}$/);
    expect(updated!.data.review.email).not.toBe(created!.data.review.email);
  });
});
