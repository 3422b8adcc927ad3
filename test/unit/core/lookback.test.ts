import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LATENESS_WINDOW_MS, Lookback, latenessOf } from '../../../src/core/lookback.js';

const settings = { floorMs: 1_000, ceilingMs: 300_000, mode: 'learned' as const };

describe('Lookback', () => {
  it('starts at the floor and covers twice the latest lateness seen, up to the ceiling', () => {
    const l = new Lookback(settings);
    expect(l.current(0)).toBe(1_000);
    l.observe(300, 0);
    expect(l.current(0)).toBe(1_000);
    l.observe(4_000, 10);
    expect(l.current(20)).toBe(8_000);
    l.observe(1_000_000, 30);
    expect(l.current(40)).toBe(300_000);
  });

  it('forgets a lateness after the window, so one slow hour does not cost every later poll', () => {
    const l = new Lookback(settings);
    l.observe(20_000, 0);
    expect(l.current(LATENESS_WINDOW_MS - 60_001)).toBe(40_000);
    expect(l.current(LATENESS_WINDOW_MS + 60_000)).toBe(1_000);
  });

  it('fixed: always the ceiling (POLL_LOOKBACK=fixed)', () => {
    const l = new Lookback({ ...settings, mode: 'fixed' });
    l.observe(2_000, 0);
    expect(l.current(0)).toBe(300_000);
  });

  it('is never below the floor nor above the ceiling, and never below twice a lateness of the window', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat(7_200_000), fc.nat(1_000_000)), { maxLength: 50 }),
        fc.nat(7_200_000),
        (observations, probe) => {
          const l = new Lookback(settings);
          const sorted = [...observations].sort((a, b) => a[0] - b[0]);
          for (const [at, lateness] of sorted) l.observe(lateness, at);
          const now = Math.max(probe, sorted.at(-1)?.[0] ?? 0);
          const current = l.current(now);
          expect(current).toBeGreaterThanOrEqual(settings.floorMs);
          expect(current).toBeLessThanOrEqual(settings.ceilingMs);
          // Whatever was seen within the last 59 minutes is still covered (up to the ceiling).
          for (const [at, lateness] of sorted) {
            if (now - at < LATENESS_WINDOW_MS - 60_000) {
              expect(current).toBeGreaterThanOrEqual(Math.min(settings.ceilingMs, 2 * lateness));
            }
          }
        },
      ),
    );
  });
});

describe('latenessOf', () => {
  it('is how far the oldest change lies before the covered time, 0 when none does', () => {
    expect(latenessOf(10_000, [12_000, 9_500, 9_800])).toBe(500);
    expect(latenessOf(10_000, [10_000, 11_000])).toBe(0);
    expect(latenessOf(10_000, [])).toBe(0);
  });
});
