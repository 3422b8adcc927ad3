import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  completedProgress,
  progressBar,
  progressJson,
  progressLine,
  progressOf,
  ProgressReporter,
} from '../../../src/core/progress.js';

describe('progressOf', () => {
  it('gives fraction, rate and ETA from seen, estimate and elapsed time', () => {
    const p = progressOf({ seen: 4_800, estimatedTotal: 10_000, startedAt: 0, now: 5_000 });
    expect(p).toEqual({
      seen: 4_800,
      estimatedTotal: 10_000,
      fraction: 0.48,
      ratePerSecond: 960,
      etaSeconds: 5_200 / 960,
    });
    expect(progressLine('sweep', p)).toBe('sweep 4800/10000 48.0% 960/s eta 5s');
    expect(progressBar('sweep', p, 10)).toBe('[#####.....] sweep 4800/10000 48.0% 960/s eta 5s');
    expect(progressJson(p, 0)).toEqual({
      seen: 4800,
      estimatedTotal: 10000,
      percent: 48,
      reviewsPerSecond: 960,
      eta: new Date((5_200 / 960) * 1000).toISOString(),
    });
  });

  it('says unknown rather than guessing', () => {
    const p = progressOf({ seen: 0, estimatedTotal: null, startedAt: 10, now: 10 });
    expect(p).toEqual({ seen: 0, estimatedTotal: null, fraction: null, ratePerSecond: null, etaSeconds: null });
    expect(progressLine('resync', p)).toBe('resync 0/? ?% ?/s eta ?');
    expect(progressOf({ seen: 0, estimatedTotal: 0, startedAt: 0, now: 0 }).fraction).toBe(1);
  });

  it('keeps fraction in 0..1, total at least seen, and ETA non-negative (property)', () => {
    fc.assert(
      fc.property(
        fc.nat(10_000_000),
        fc.option(fc.nat(10_000_000)),
        fc.nat(1_000_000),
        fc.nat(100_000_000),
        (seen, total, start, elapsed) => {
          const p = progressOf({ seen, estimatedTotal: total, startedAt: start, now: start + elapsed });
          if (p.fraction !== null) {
            expect(p.fraction).toBeGreaterThanOrEqual(0);
            expect(p.fraction).toBeLessThanOrEqual(1);
          }
          if (p.estimatedTotal !== null) expect(p.estimatedTotal).toBeGreaterThanOrEqual(seen);
          if (p.etaSeconds !== null) expect(p.etaSeconds).toBeGreaterThanOrEqual(0);
          expect(progressBar('x', p, 20)).toMatch(/^\[[#.]{20}\] x /);
        },
      ),
    );
  });
});

describe('ProgressReporter', () => {
  const p = (seen: number) => progressOf({ seen, estimatedTotal: 100, startedAt: 0, now: 1_000 });

  it('redraws one line on a TTY', () => {
    const written: string[] = [];
    const r = new ProgressReporter({ isTTY: true, write: (t) => written.push(t) }, 'sweep');
    r.update(p(10), 0);
    r.update(p(20), 1);
    expect(r.active).toBe(true);
    r.done(p(100));
    expect(written).toHaveLength(3);
    expect(written.slice(0, 2).every((t) => t.startsWith('\r') && !t.includes('\n'))).toBe(true);
    expect(written[2]).toMatch(/\[#{30}\] sweep 100\/100 100\.0% .* done\n$/);
  });

  it('prints plain lines at most once per interval when not a TTY, and always the last', () => {
    const written: string[] = [];
    const r = new ProgressReporter({ write: (t) => written.push(t) }, 'sweep', 5_000);
    r.update(p(10), 0);
    r.update(p(20), 4_999);
    r.update(p(30), 5_000);
    r.done(p(100), 'completed');
    expect(written).toEqual([
      'sweep 10/100 10.0% 10/s eta 9s\n',
      'sweep 30/100 30.0% 30/s eta 2s\n',
      'sweep 100/100 100.0% 100/s eta 0s completed\n',
    ]);
    expect(written.join('')).not.toContain('\r');
  });

  it('shows 100.0 % only for a pass that ended, with the count it ended at', () => {
    const sample = (seen: number) => progressOf({ seen, estimatedTotal: 3_000, startedAt: 0, now: 10_000 });
    expect(progressLine('sweep', sample(2_999))).toMatch(/^sweep 2999\/3000 99\.9% /);
    expect(progressJson(sample(2_999), 10_000).percent).toBe(99.9);
    expect(progressJson(sample(855), 10_000).percent).toBe(28.5);
    // The last sample came before the last page (2,900 of an estimated 3,000); the pass saw 2,950 in all.
    const done = completedProgress(sample(2_900), 2_950);
    expect(progressLine('sweep', done)).toBe('sweep 2950/2950 100.0% 290/s eta 0s');
    expect(completedProgress(sample(2_900), 0).seen).toBe(2_900);
  });
});
