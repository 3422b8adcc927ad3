import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MIN_PERIOD_POLLS, TIER_RATIO, TrailingSchedule, trailingTiers } from '../../../src/core/trailing.js';
import { cappedWatermark, DataPresent, PRESENT_MIN_SAMPLES } from '../../../src/core/upstream-present.js';

// The two halves of freshness whatever the data's clock does: the watermark never passes the upstream's present,
// and trailing reads in tiers bound the delay of a change that shows late.

const DEFAULTS = { overlapMs: 300_000, boundMs: 30_000, pollIntervalMs: 1_000 };

describe('cappedWatermark and DataPresent', () => {
  it('a record stamped 4 minutes or 23 hours ahead moves the watermark no further than the present', () => {
    const present = 1_000_000;
    expect(cappedWatermark(present + 240_000, present)).toBe(present);
    expect(cappedWatermark(present + 23 * 3_600_000, present)).toBe(present);
    expect(cappedWatermark(present - 5, present)).toBe(present - 5);
    fc.assert(
      fc.property(fc.nat(), fc.nat(), (max, now) => {
        const w = cappedWatermark(max, now);
        expect(w).toBeLessThanOrEqual(max);
        expect(w).toBeLessThanOrEqual(now);
      }),
    );
  });

  it('is the earliest of the Date header, local time and the samples until three reviews changed, then the low quartile', () => {
    const p = new DataPresent();
    expect(p.at(10_000, null)).toBe(10_000);
    expect(p.at(10_000, 70_000)).toBe(10_000);
    expect(p.at(10_000, 4_000)).toBe(4_000);
    // The data runs 5 minutes ahead of local time (and of the header); one review's change is 4 minutes further.
    p.observe(300_000 - 200, 0, '1');
    p.observe(240_000 + 300_000 + 1_000, 1_000, 'ahead');
    expect(p.offset()).toBeNull();
    expect(p.at(10_000, 70_000)).toBe(10_000);
    p.observe(2_000 + 300_000 - 100, 2_000, '2');
    expect(p.offset()).toBe(299_800);
    // Learned, but never past local time: a data clock truly ahead of this host costs re-reads, never a change.
    expect(p.at(10_000, 70_000)).toBe(10_000);
    expect(PRESENT_MIN_SAMPLES).toBe(3);
  });

  it('is never past local time, even when every review sampled is stamped ahead', () => {
    // Schedule seed 6279: the three reviews that changed were all stamped ahead (19 minutes to 2 hours), the low
    // quartile held the present 19 minutes ahead, and a change of a review stamped 2 minutes ahead was never read.
    const p = new DataPresent();
    p.observe(1_000 + 1_140_000, 1_000, '112');
    p.observe(2_000 + 7_800_000, 2_000, '75');
    p.observe(3_000 + 120_000, 3_000, '149');
    expect(p.offset()).toBe(120_000);
    expect(p.at(4_000, null)).toBe(4_000);
    expect(cappedWatermark(4_000 + 1_140_000, p.at(4_000, null))).toBe(4_000);
    // Honest samples behind local time still rule.
    for (const [i, r] of ['1', '2', '3', '4', '5', '6', '7', '8', '9'].entries())
      p.observe(5_000 + i - 50, 5_000 + i, r);
    expect(p.at(6_000, null)).toBe(6_000 - 50);
  });

  it('one review stamped ahead and changed again and again (each stamp a ms past the last) is one sample', () => {
    // Schedule seed 308: per poll, three of five samples were one review's, and the present ran hours ahead.
    const p = new DataPresent();
    // Local time is the data's; review 7 is stamped 3 hours ahead and changes in three polls.
    for (let i = 0; i < 3; i++) p.observe(10_800_000 + i, i * 2_000, '7');
    p.observe(6_000 - 300, 6_000, '1');
    expect(p.at(9_000, 9_000)).toBe(9_000 - 300);
    p.observe(8_000 - 100, 8_000, '2');
    expect(p.offset()).toBe(-300);
    p.observe(10_000 - 200, 10_000, '3');
    expect(p.offset()).toBe(-300);
    expect(p.at(13_000, 13_000)).toBeLessThanOrEqual(13_000);
  });

  it('a Date header an hour ahead is not trusted, one an hour behind until three reviews are sampled', () => {
    // Date-header-apart: seed 330091 (a header an hour ahead; one stamp ahead then carried the watermark past every
    // change), seeds 230080, 230134, 61004 (one an hour behind: polls read an hour back until five polls sampled).
    const ahead = new DataPresent();
    const later = (local: number) => local + 3_600_000;
    expect(ahead.at(500, later(500))).toBe(500);
    ahead.observe(1_000 - 200, 1_000, '1');
    expect(ahead.at(2_000, later(2_000))).toBe(2_000 - 200);
    // One stamped ahead cannot raise the earliest.
    ahead.observe(3_000 + 240_000, 3_000, 'ahead');
    expect(ahead.at(4_000, later(4_000))).toBe(4_000 - 200);
    const behind = new DataPresent();
    const earlier = (local: number) => local - 3_600_000;
    behind.observe(1_000 - 200, 1_000, '1');
    behind.observe(3_000 + 240_000, 3_000, 'ahead');
    expect(behind.at(4_000, earlier(4_000))).toBe(earlier(4_000));
    behind.observe(5_000 - 100, 5_000, '3');
    expect(behind.at(6_000, earlier(6_000))).toBe(6_000 - 200);
  });

  it('is never ahead of the data clock while reviews stamped ahead are under three quarters of those sampled', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ ahead: fc.boolean(), by: fc.integer({ min: 0, max: 1e9 }) }), { maxLength: 40 }),
        (changes) => {
          const p = new DataPresent();
          // Local time is the data's; each change is its own review's, found by the poll ending 1 s later.
          changes.forEach((c, i) =>
            p.observe(c.ahead ? i * 1_000 + 1 + c.by : i * 1_000 - c.by, i * 1_000 + 1_000, String(i)),
          );
          const recent = changes.slice(-15);
          const ahead = recent.filter((c) => c.ahead).length;
          if (recent.length < 3 || recent.length - ahead > Math.floor((recent.length - 1) / 4)) {
            expect(p.at(changes.length * 1_000, changes.length * 1_000)).toBeLessThanOrEqual(changes.length * 1_000);
          }
        },
      ),
    );
  });

  it('no single review moves the learned present, whatever it showed', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: -1_000, max: 0 }), { minLength: 14, maxLength: 14 }),
        fc.integer(),
        (o, x) => {
          const p = new DataPresent();
          o.forEach((offset, i) => p.observe(i + offset, i, String(i)));
          p.observe(x, 0, 'outlier');
          // One outlier among 15 moves the low quartile by at most one rank among the others.
          expect(p.offset()!).toBeGreaterThanOrEqual(-1_000);
          expect(p.offset()!).toBeLessThanOrEqual(0);
        },
      ),
    );
  });

  it('what trailing reads find is a sample only while polls find no on-time change (a present learned ahead)', () => {
    // Date-header-apart seed 330136: the first three reviews sampled were stamped 10 minutes ahead; polls then
    // found no change (the watermark passed them all) and only trailing reads could bring the present back.
    const p = new DataPresent();
    for (let i = 0; i < 3; i++) p.observe(600_000 + i * 1_000, i * 1_000 + 1_000, `ahead${i}`);
    expect(p.offset()).toBeGreaterThan(590_000);
    // Trailing reads that began after the last on-time poll sample: their finds count.
    for (let i = 0; i < 3; i++) {
      const t = 10_000 + i * 5_000;
      expect(p.observeTrailing(t - 2_000, t, t + 500, `found${i}`)).toBe(true);
    }
    expect(p.offset()!).toBeLessThanOrEqual(0);
    // Polls find on-time changes again: a trailing read spanning one of them finds only late changes, not counted.
    p.observe(30_000 - 100, 30_000, 'ontime');
    expect(p.observeTrailing(30_000 - 120_000, 29_000, 31_000, 'late')).toBe(false);
    expect(p.offset()!).toBeGreaterThanOrEqual(-2_500);
  });
});

describe('samples that put the data ahead of local time', () => {
  it('leave the present at the earlier of local time and the Date header (local time may run ahead of the data)', () => {
    // Schedule seed 220: the data's clock 55 s behind local time, the Date header with it, and every review sampled
    // stamped ahead: the present, capped at local time only, ran 55 s ahead of the data.
    const p = new DataPresent();
    for (let i = 0; i < 3; i++) p.observe(600_000 + i, 1_000 + i, `ahead${i}`);
    expect(p.offset()!).toBeGreaterThan(0);
    expect(p.at(10_000, 10_000 - 55_000)).toBe(10_000 - 55_000);
    // Without a header, or with one ahead of local time: local time, as before.
    expect(p.at(10_000, null)).toBe(10_000);
    expect(p.at(10_000, 70_000)).toBe(10_000);
  });
});

describe('finds stamped ahead are no sign that polls see the present', () => {
  it('a poll finding only records stamped past the present leaves what trailing reads find a sample', () => {
    // Date-header-apart seed 430093 (traced on branch dha): with the present ahead of the data, polls found only
    // records stamped further ahead still; counted as on-time finds, they kept trailing finds from correcting it.
    const p = new DataPresent();
    p.observe(180_000, 1_000, 'r7', true);
    // A trailing read begun before that poll ended.
    expect(p.observeTrailing(-60_000, 500, 3_000, 'r8')).toBe(true);
    // An on-time find (not ahead) still stops them, as before.
    p.observe(4_000 - 100, 4_000, 'r9');
    expect(p.observeTrailing(-60_000, 3_500, 5_000, 'r10')).toBe(false);
  });
});

describe('trailingTiers', () => {
  it('at defaults: the widest covers POLL_OVERLAP_MS at the bound, each narrower a quarter at a quarter', () => {
    expect(trailingTiers(DEFAULTS)).toEqual([
      { index: 1, coverMs: 18_750, periodMs: 4_688 },
      { index: 2, coverMs: 75_000, periodMs: 18_750 },
      { index: 3, coverMs: 300_000, periodMs: 30_000 },
    ]);
  });

  it('none without a bound or an overlap', () => {
    expect(trailingTiers({ ...DEFAULTS, boundMs: 0 })).toEqual([]);
    expect(trailingTiers({ ...DEFAULTS, overlapMs: 0 })).toEqual([]);
  });

  it('reads per change grow with the logarithm of the lateness covered; no period under MIN_PERIOD_POLLS polls', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1_000, max: 7 * 86_400_000 }),
        fc.integer({ min: 1_000, max: 3_600_000 }),
        fc.integer({ min: 100, max: 60_000 }),
        (overlapMs, boundMs, pollIntervalMs) => {
          const tiers = trailingTiers({ overlapMs, boundMs, pollIntervalMs });
          expect(tiers.at(-1)).toEqual({ index: tiers.length, coverMs: overlapMs, periodMs: boundMs });
          for (const t of tiers.slice(0, -1))
            expect(t.periodMs).toBeGreaterThanOrEqual(MIN_PERIOD_POLLS * pollIntervalMs - 1);
          const below = tiers.slice(0, -1);
          // Below the bound, each narrower tier reads a change 1 + TIER_RATIO times (more where the bound caps its period).
          fc.pre(boundMs * TIER_RATIO * TIER_RATIO >= overlapMs);
          const reads = below.reduce((n, t) => n + (t.coverMs + t.periodMs) / t.periodMs, 0);
          // Rounded to whole milliseconds: a tenth of a read per tier.
          expect(reads).toBeLessThanOrEqual(below.length * (TIER_RATIO + 1.1));
          expect(below.length).toBeLessThanOrEqual(Math.max(0, Math.log(overlapMs / 1_000) / Math.log(TIER_RATIO)) + 1);
        },
      ),
    );
  });
});

describe('TrailingSchedule', () => {
  const tiers = trailingTiers(DEFAULTS);

  it('a read starts where the tier last began less its coverage, so a delayed read misses nothing', () => {
    const s = new TrailingSchedule(tiers);
    const t0 = 1_000_000;
    // Every tier is due at once at first; the widest goes (it serves the others).
    const first = s.due(t0, t0)!;
    expect(first.tier.index).toBe(3);
    expect(first.since).toBe(t0 - 30_000 - 300_000);
    s.completed(first, t0, t0, t0 + 2_000);
    expect(s.due(t0 + 2_000, t0 + 2_000)).toBeNull();
    expect(s.nextDueAt()).toBe(t0 + 4_688);
    // Tier 1 read late (12 s after its last began, the budget went elsewhere): it reads back 12 s more, not less.
    const late = s.due(t0 + 12_000, t0 + 12_000)!;
    expect(late.tier.index).toBe(1);
    expect(late.since).toBe(t0 - 18_750);
    s.completed(late, t0 + 12_000, t0 + 12_000, t0 + 13_000);
    // The bound it kept: from the read before it began to this one's commit.
    expect(s.kept()[0]!.keptMs).toBe(13_000);
  });

  it('holding: the widest tier kept bound, or the wait of an overdue read', () => {
    const s = new TrailingSchedule(tiers);
    expect(s.holding(0)).toBeNull();
    const r = s.due(0, 0)!;
    s.completed(r, 0, 0, 1_000);
    expect(s.holding(1_000)).toBe(31_000);
    expect(s.holding(90_000)).toBe(90_000);
  });

  it('readSince: only a read of the widest tier begun after the time counts; without tiers, nothing to wait for', () => {
    const s = new TrailingSchedule(tiers);
    expect(s.readSince(0)).toBe(false);
    const widest = s.due(1_000, 1_000)!;
    s.completed(widest, 1_000, 1_000, 2_000);
    expect([s.readSince(999), s.readSince(1_000)]).toEqual([true, false]);
    // A narrower tier's read does not serve the widest one.
    const narrow = s.due(7_000, 7_000)!;
    expect(narrow.tier.index).toBe(1);
    s.completed(narrow, 7_000, 7_000, 7_500);
    expect(s.readSince(5_000)).toBe(false);
    expect(new TrailingSchedule([]).readSince(0)).toBe(true);
  });

  it('hurry: the widest tier is due just after the time asked, until a read of it begun after that has completed', () => {
    const s = new TrailingSchedule(tiers);
    const widest = tiers.at(-1)!;
    // The widest tier's read serves the narrower ones too.
    s.completed(s.due(1_000, 1_000)!, 1_000, 1_000, 2_000);
    expect(s.nextDueAt()).toBe(1_000 + tiers[0]!.periodMs);
    s.hurry(5_000);
    // Not at 5 000 itself: a read begun then does not count as one since.
    expect(s.due(5_000, 5_000)).toBeNull();
    const read = s.due(5_001, 5_001)!;
    expect(read.tier).toBe(widest);
    s.completed(read, 5_001, 5_001, 6_000);
    expect(s.readSince(5_000)).toBe(true);
    expect(s.due(6_000, 6_000)).toBeNull();
    expect(s.nextDueAt(new Set(tiers.slice(0, -1).map((t) => t.index)))).toBe(5_001 + widest.periodMs);
  });

  it("whatever the reads' timing, every change showing up to POLL_OVERLAP_MS late lies in the window of the next read of the widest tier", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 120_000 }), { minLength: 2, maxLength: 20 }),
        fc.integer({ min: 0, max: 300_000 }),
        (gaps, lateness) => {
          const s = new TrailingSchedule(tiers);
          let now = 1_000_000;
          let previousStart: number | null = null;
          for (const gap of gaps) {
            now += gap;
            const read = s.due(now, now);
            if (read === null) continue;
            if (read.tier.index === 3 && previousStart !== null) {
              // A change that showed just after the previous read began, `lateness` late, is read now.
              expect(previousStart - lateness).toBeGreaterThanOrEqual(read.since);
            }
            if (read.tier.index === 3) previousStart = now;
            s.completed(read, now, now, now + 500);
          }
        },
      ),
    );
  });
});
