import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { diffReview } from '../../../src/core/diff.js';
import { EVENT_SCHEMAS } from '../../../src/core/events.js';
import {
  createFieldPolicy,
  deadLetterRecord,
  DEFAULT_FIELD_POLICY_SPEC,
  EMAIL_PATTERN,
  FieldPolicySpecError,
  hmacSha256,
  parseFieldPolicySpec,
  protectEvent,
  type FieldPolicySpec,
} from '../../../src/core/field-policy.js';
import { DEFAULT_PRIVACY, fieldPolicyFromConfig } from '../../../src/config/privacy.js';
import { fingerprint } from '../../../src/core/snapshot-entry.js';
import type { Review } from '../../../src/core/review.js';

const KEY = Buffer.from('k'.repeat(32));
const TOKEN = /^hmac-sha256:[0-9a-f]{64}$/;
const spec = (over: Partial<FieldPolicySpec> = {}): FieldPolicySpec => ({ ...DEFAULT_FIELD_POLICY_SPEC, ...over });
const hasEmail = (text: string) => new RegExp(EMAIL_PATTERN.source).test(text);

const review: Review = {
  id: 7,
  updated_date: 1_700_000_000_000,
  client_publication_status: 'PENDING',
  pwr_publication_status: 'APPROVED',
  headline: 'Great',
  nickname: 'Robin42',
  email: 'robin42.7@example.com',
  location: 'Leeds',
  comments: 'Write to me at robin@example.org or call.',
  rating: 4,
  extra: { contact: { mail: 'r@example.net', phone: '123' }, tags: ['a', 'b@c.io'] },
};

describe('field policy defaults', () => {
  it('drops email and every e-mail-shaped value without a key, keeps everything else', () => {
    const out = createFieldPolicy(DEFAULT_FIELD_POLICY_SPEC, null).applyToRecord(review);
    expect(out).not.toHaveProperty('email');
    expect(out.comments).toBe('Write to me at (email) or call.');
    expect(out.extra).toEqual({ contact: { phone: '123' }, tags: ['a', '(email)'] });
    expect(out.nickname).toBe('Robin42');
    expect(out.rating).toBe(4);
    expect(hasEmail(JSON.stringify(out))).toBe(false);
    // The input is left as it was: the diff and the snapshot keep the raw values.
    expect(review.email).toBe('robin42.7@example.com');
  });

  it('hashes them with a key: a stable keyed token, the same for the same address', () => {
    const policy = createFieldPolicy(DEFAULT_FIELD_POLICY_SPEC, KEY);
    const a = policy.applyToRecord(review);
    const b = policy.applyToRecord({ ...review, headline: 'changed' });
    expect(a.email).toMatch(TOKEN);
    expect(b.email).toBe(a.email);
    const other = createFieldPolicy(DEFAULT_FIELD_POLICY_SPEC, Buffer.from('x'.repeat(32))).applyToRecord(review);
    expect(other.email).not.toBe(a.email);
    expect(a.comments).toMatch(/^Write to me at hmac-sha256:[0-9a-f]{64} or call\.$/);
    expect(hasEmail(JSON.stringify(a))).toBe(false);
  });

  it('publishes raw only with the explicit opt-in', () => {
    const out = createFieldPolicy(spec({ allowRawEmail: true }), null).applyToRecord(review);
    expect(out).toEqual(review);
  });
});

describe('configured rules', () => {
  it('excludes, hashes and masks dotted paths, through arrays', () => {
    const policy = createFieldPolicy(
      parseFieldPolicySpec({
        EVENT_FIELDS_EXCLUDE: 'location,extra.contact.phone',
        EVENT_FIELDS_HASH: 'nickname',
        EVENT_FIELDS_MASK: 'headline:2,comments,items.name:1',
      }),
      KEY,
    );
    const out = policy.applyToRecord({ ...review, items: [{ name: 'Alice' }, { name: 'Bob' }] });
    expect(out).not.toHaveProperty('location');
    expect(out.nickname).toMatch(TOKEN);
    expect(out.headline).toBe('Gr***');
    expect(out.comments).toBe('***');
    expect(out.items).toEqual([{ name: 'A***' }, { name: 'B***' }]);
    expect(out.extra).toEqual({ contact: { mail: expect.stringMatching(TOKEN) }, tags: ['a', expect.any(String)] });
  });

  it('keeps only the allow-list (and the fields every event needs)', () => {
    const policy = createFieldPolicy(
      parseFieldPolicySpec({ EVENT_FIELDS_INCLUDE: 'rating,extra.contact.phone' }),
      null,
    );
    expect(policy.applyToRecord(review)).toEqual({
      id: 7,
      updated_date: 1_700_000_000_000,
      client_publication_status: 'PENDING',
      pwr_publication_status: 'APPROVED',
      rating: 4,
      extra: { contact: { phone: '123' } },
    });
  });

  it('an included email is still hashed or dropped by default', () => {
    const policy = createFieldPolicy(parseFieldPolicySpec({ EVENT_FIELDS_INCLUDE: 'email' }), KEY);
    expect(policy.applyToRecord(review).email).toMatch(TOKEN);
  });

  it.each([
    [{ EVENT_FIELDS_EXCLUDE: 'id' }, 'EVENT_FIELDS_EXCLUDE', 'required'],
    [{ EVENT_FIELDS_HASH: 'client_publication_status' }, 'EVENT_FIELDS_HASH', 'required'],
    [{ EVENT_FIELDS_EXCLUDE: 'a..b' }, 'EVENT_FIELDS_EXCLUDE', 'dotted'],
    [{ EVENT_FIELDS_MASK: 'headline:x' }, 'EVENT_FIELDS_MASK', 'path:N'],
    [{ EVENT_FIELDS_EXCLUDE: 'email', EVENT_FIELDS_HASH: 'email' }, 'EVENT_FIELDS_HASH', 'already'],
  ])('refuses %o naming %s', (settings, setting, fragment) => {
    let err: unknown;
    try {
      parseFieldPolicySpec(settings);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(FieldPolicySpecError);
    expect((err as FieldPolicySpecError).setting).toBe(setting);
    expect((err as Error).message).toContain(fragment);
  });
});

describe('events and dead letters', () => {
  const source = 'urn:reviews-bridge:test';
  const diff = (previous: ReturnType<typeof stored> | null, r: Review) =>
    diffReview({ previous, review: r, detection: 'incremental', source, fetchedAt: 2e12, suppressCreated: false });
  const stored = (r: Review) => ({
    client: r.client_publication_status,
    pwr: r.pwr_publication_status,
    updatedDate: r.updated_date,
    sequence: 1,
    observedAt: 1e12,
    ...fingerprint(r),
  });

  it('a change of the raw e-mail is detected and named, while the published value is hashed or absent', () => {
    const changed = { ...review, email: 'new.address@example.com' };
    const { events } = diff(stored(review), changed);
    expect(events.map((e) => e.type)).toEqual(['review.updated']);
    expect(events[0]!.data.changed_fields).toEqual(['email']);
    for (const key of [KEY, null]) {
      const published = protectEvent(events[0]!, createFieldPolicy(DEFAULT_FIELD_POLICY_SPEC, key));
      expect(JSON.stringify(published)).not.toContain('new.address');
      expect(published.data.changed_fields).toEqual(['email']);
      expect(EVENT_SCHEMAS['review.updated'].safeParse(published).success).toBe(true);
      if (key) expect(published.data.review.email).toMatch(TOKEN);
      else expect(published.data.review).not.toHaveProperty('email');
    }
  });

  it('a hashed or masked number still matches the published schema', () => {
    const policy = createFieldPolicy(
      parseFieldPolicySpec({ EVENT_FIELDS_HASH: 'rating', EVENT_FIELDS_MASK: 'merchant_id' }),
      KEY,
    );
    const event = protectEvent(diff(null, { ...review, merchant_id: 9040 }).events[0]!, policy);
    expect(event.data.review.rating).toMatch(TOKEN);
    expect(event.data.review.merchant_id).toBe('***');
    expect(EVENT_SCHEMAS['review.created'].safeParse(event).success).toBe(true);
  });

  it('dead letters: reference carries the size only, masked the record under the policy, raw all of it', () => {
    const policy = createFieldPolicy(DEFAULT_FIELD_POLICY_SPEC, null);
    const raw = { id: 'x', email: 'a@b.example', body: 'c@d.example' };
    expect(deadLetterRecord(raw, policy, 'reference')).toEqual({ record_bytes: JSON.stringify(raw).length });
    expect(deadLetterRecord(raw, policy, 'masked')).toEqual({ record: { id: 'x' } });
    expect(deadLetterRecord('text with e@f.example', policy, 'masked')).toEqual({ record: 'text with (email)' });
    expect(deadLetterRecord(raw, policy, 'raw')).toEqual({ record: raw });
  });
});

// Arbitrary JSON with e-mail addresses planted in keys, whole values and free text.
const emailish = fc.oneof(
  fc.emailAddress(),
  fc.tuple(fc.string(), fc.emailAddress(), fc.string()).map(([a, e, b]) => `${a}${e}${b}`),
  fc.tuple(fc.string(), fc.emailAddress()).map(([a, e]) => `${a}\u0001${e}`),
  fc.tuple(fc.emailAddress(), fc.emailAddress()).map(([a, b]) => `${a}${b}`),
);
const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.string(),
    emailish,
    fc.integer(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    tie('object'),
  ),
  object: fc.dictionary(fc.oneof(fc.string(), emailish, fc.constant('email')), tie('value'), { maxKeys: 5 }),
})).object;

describe('property: under defaults no output contains an e-mail-shaped string', () => {
  for (const key of [null, KEY]) {
    it(`with ${key ? 'a hash key' : 'no key'}`, () => {
      const policy = createFieldPolicy(DEFAULT_FIELD_POLICY_SPEC, key);
      fc.assert(
        fc.property(json, emailish, (record, email) => {
          const out = JSON.stringify(policy.applyToRecord({ ...record, email }));
          expect(hasEmail(out)).toBe(false);
          expect(hasEmail(JSON.stringify(policy.applyToValue([record, email])))).toBe(false);
        }),
        { numRuns: 300 },
      );
    });
  }
});

describe('the configured policy', () => {
  it('reads the hash key file and warns at start for every raw opt-in', () => {
    const dir = mkdtempSync(join(tmpdir(), 'policy-'));
    const keyFile = join(dir, 'key');
    writeFileSync(keyFile, `${'k'.repeat(32)}\n`);
    const warnings: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(line) });
    const quiet = fieldPolicyFromConfig({ ...DEFAULT_PRIVACY, hashKey: { file: keyFile } }, logger);
    expect(quiet.applyToRecord(review).email).toBe(
      createFieldPolicy(DEFAULT_FIELD_POLICY_SPEC, KEY).applyToRecord(review).email,
    );
    expect(warnings).toEqual([]);
    const raw = fieldPolicyFromConfig(
      { fields: spec({ allowRawEmail: true }), hashKey: null, deadLetterPayload: 'raw' },
      logger,
    );
    expect(raw.applyToRecord(review).email).toBe(review.email);
    expect(warnings.join('')).toContain('EVENT_FIELDS_ALLOW_RAW_EMAIL');
    expect(warnings.join('')).toContain('DEAD_LETTER_PAYLOAD');
  });
});

describe('hmacSha256', () => {
  it('equals createHmac for any key (shorter, equal to and longer than the block) and any text', () => {
    const equal = (k: Buffer, text: string) =>
      hmacSha256(k)(text) === createHmac('sha256', k).update(text).digest('hex');
    // The block's edges every time, not only when the random keys happen to hit them.
    for (const length of [1, 63, 64, 65, 128, 200]) expect(equal(Buffer.alloc(length, 0xa7), 'é\u{1F600}x')).toBe(true);
    // 200 random runs and a generous limit: a loaded CI machine took more than vitest's 5 s for 500 runs.
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 200 }), fc.string({ unit: 'binary' }), (key, text) =>
        equal(Buffer.from(key), text),
      ),
      { numRuns: 200 },
    );
  }, 30_000);

  it('gives the same digest on repeated calls (its pads are not overwritten by a call)', () => {
    const f = hmacSha256(Buffer.from('a key of some length'));
    const first = f('someone@example.org');
    f('x'.repeat(5_000));
    expect(f('someone@example.org')).toBe(first);
  });
});
