import { describe, expect, it } from 'vitest';
import { LimiterClosedError, RateLimiter } from '../../../src/upstream/rate-limiter.js';
import type { RequestPriority } from '../../../src/core/domain.js';
import { FakeClock, flush } from './fake-clock.js';

function setup(options: Partial<ConstructorParameters<typeof RateLimiter>[0]> = {}) {
  const clock = new FakeClock();
  const limiter = new RateLimiter({ rps: 10, clock, ...options });
  const granted: { label: string; at: number }[] = [];
  const take = (label: string, kind: RequestPriority = 'sweep', signal?: AbortSignal) => {
    const p = limiter.acquire(kind, signal).then(() => {
      granted.push({ label, at: clock.now() });
    });
    return p;
  };
  return { clock, limiter, granted, take };
}

describe('RateLimiter pacing', () => {
  it('sends the first request at once and spaces the rest at 1/rps', async () => {
    const { clock, granted, take } = setup();
    for (let i = 0; i < 5; i++) void take(`r${i}`);
    await clock.advance(1000);
    expect(granted.map((g) => g.at)).toEqual([0, 100, 200, 300, 400]);
  });

  it('lets `burst` requests go back to back after an idle time, then paces', async () => {
    const { clock, granted, take } = setup({ burst: 3 });
    for (let i = 0; i < 5; i++) void take(`r${i}`);
    await clock.advance(1000);
    expect(granted.map((g) => g.at)).toEqual([0, 0, 0, 100, 200]);
  });

  it('keeps the long-run rate at the target even when the interval is not a whole number of ms', async () => {
    const { clock, granted, take } = setup({ rps: 9.5 });
    for (let i = 0; i < 96; i++) void take(`r${i}`);
    await clock.advance(20_000);
    expect(granted).toHaveLength(96);
    // 95 intervals of 105.26 ms = 10 000 ms; rounding timers up must not accumulate.
    expect(granted.at(-1)!.at).toBeLessThanOrEqual(10_001);
    const gaps = granted.slice(1).map((g, i) => g.at - granted[i]!.at);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(95);
  });

  it('resolves acquire with the time waited', async () => {
    const { clock, limiter } = setup();
    await limiter.acquire('sweep');
    const waited = limiter.acquire('sweep');
    await clock.advance(150);
    await expect(waited).resolves.toBe(100);
  });
});

describe('RateLimiter priority', () => {
  it('serves queued incremental requests before queued sweep requests', async () => {
    const { clock, granted, take } = setup();
    void take('s0');
    void take('s1');
    void take('s2');
    void take('i0', 'incremental');
    void take('i1', 'incremental');
    await clock.advance(1000);
    expect(granted.map((g) => g.label)).toEqual(['s0', 'i0', 'i1', 's1', 's2']);
  });
});

describe('RateLimiter idle cost and abort', () => {
  it('arms no timer while nobody waits', async () => {
    const { clock, limiter, take } = setup();
    expect(limiter.state().timerArmed).toBe(false);
    void take('a');
    void take('b');
    expect(limiter.state().timerArmed).toBe(true);
    await clock.advance(500);
    expect(limiter.state().timerArmed).toBe(false);
    expect(clock.pending).toBe(0);
  });

  it('rejects an aborted waiter with the signal reason and disarms when the queue empties', async () => {
    const { clock, limiter, take } = setup();
    await take('first');
    const controller = new AbortController();
    const waiting = limiter.acquire('sweep', controller.signal);
    expect(limiter.state().queued.sweep).toBe(1);
    controller.abort(new Error('shutdown'));
    await expect(waiting).rejects.toThrow('shutdown');
    expect(limiter.state().queued.sweep).toBe(0);
    expect(clock.pending).toBe(0);
  });

  it('rejects at once when the signal is already aborted', async () => {
    const { limiter } = setup();
    await expect(limiter.acquire('sweep', AbortSignal.abort(new Error('gone')))).rejects.toThrow('gone');
  });

  it('close() rejects every waiter and later acquisitions', async () => {
    const { limiter } = setup();
    await limiter.acquire('sweep');
    const a = limiter.acquire('sweep');
    const b = limiter.acquire('incremental');
    limiter.close();
    await expect(a).rejects.toBeInstanceOf(LimiterClosedError);
    await expect(b).rejects.toBeInstanceOf(LimiterClosedError);
    await expect(limiter.acquire('sweep')).rejects.toBeInstanceOf(LimiterClosedError);
  });
});

describe('RateLimiter adaptation (AIMD)', () => {
  it('halves the rate on a throttled answer, once per window of requests sent before the decrease', async () => {
    const { clock, limiter } = setup({ increasePerSecond: 0.5 });
    const sentEarly = limiter.now();
    await clock.advance(10);
    limiter.throttled(null, sentEarly);
    expect(limiter.state().currentRps).toBe(5);
    // A second answer to a request sent before that decrease is old news.
    limiter.throttled(null, sentEarly);
    expect(limiter.state().currentRps).toBe(5);
    const sentLater = limiter.now();
    await clock.advance(1000);
    limiter.throttled(null, sentLater);
    // 5 + 0.5 recovered in the second, then halved.
    expect(limiter.state().currentRps).toBeCloseTo(2.75, 5);
  });

  it('honours a decrease cooldown when configured', async () => {
    const { clock, limiter } = setup({ decreaseCooldownMs: 1000, increasePerSecond: 0.5 });
    limiter.throttled(null);
    limiter.throttled(null);
    expect(limiter.state().currentRps).toBe(5);
    await clock.advance(1000);
    limiter.throttled(null);
    expect(limiter.state().currentRps).toBeCloseTo(2.75, 5);
  });

  it('recovers additively to the configured rate and not beyond', async () => {
    const { clock, limiter } = setup({ increasePerSecond: 0.5 });
    limiter.throttled(null);
    await clock.advance(4000);
    expect(limiter.state().currentRps).toBeCloseTo(7, 5);
    await clock.advance(60_000);
    expect(limiter.state().currentRps).toBe(10);
  });

  it('does not recover while a Retry-After pause lasts', async () => {
    const { clock, limiter } = setup({ increasePerSecond: 0.5 });
    limiter.throttled(3);
    await clock.advance(3000);
    expect(limiter.state().currentRps).toBe(5);
    await clock.advance(2000);
    expect(limiter.state().currentRps).toBeCloseTo(6, 5);
  });

  it('by default doubles the reduced rate every ten seconds, whatever the scale', async () => {
    const { clock, limiter } = setup({ rps: 40 });
    for (let i = 0; i < 4; i++) limiter.throttled(null);
    expect(limiter.state().currentRps).toBe(2.5);
    await clock.advance(10_000);
    expect(limiter.state().currentRps).toBeCloseTo(5, 5);
    await clock.advance(5_000);
    expect(limiter.state().currentRps).toBeCloseTo(5 * Math.SQRT2, 5);
  });

  it('recovers from a deep fall in about a minute', async () => {
    const { clock, limiter } = setup({ rps: 10 });
    for (let i = 0; i < 10; i++) limiter.throttled(null);
    expect(limiter.state().currentRps).toBe(0.1);
    await clock.advance(60_000);
    expect(limiter.state().currentRps).toBeCloseTo(6.4, 5);
    await clock.advance(10_000);
    expect(limiter.state().currentRps).toBe(10);
  });

  it('never drops below the floor', () => {
    const { clock, limiter } = setup({ minRps: 2 });
    for (let i = 0; i < 20; i++) limiter.throttled(null);
    expect(limiter.state().currentRps).toBe(2);
    expect(clock.now()).toBe(0);
  });

  it('spaces requests at the reduced rate after a throttle', async () => {
    const { clock, granted, take, limiter } = setup({ increasePerSecond: 0 });
    await take('before');
    limiter.throttled(null);
    void take('a');
    void take('b');
    await clock.advance(1000);
    expect(granted.map((g) => g.at)).toEqual([0, 200, 400]);
  });

  it('holds every request until Retry-After has passed', async () => {
    const { clock, granted, take, limiter } = setup({ increasePerSecond: 0 });
    await take('before');
    limiter.throttled(2);
    expect(limiter.state().pausedForMs).toBe(2000);
    void take('sweep');
    void take('incremental', 'incremental');
    await clock.advance(1999);
    expect(granted).toHaveLength(1);
    await clock.advance(2000);
    expect(granted.map((g) => g.label)).toEqual(['before', 'incremental', 'sweep']);
    expect(granted[1]!.at).toBeGreaterThanOrEqual(2000);
  });

  it('a fresh limiter is at its configured rate with nothing queued', async () => {
    const { limiter } = setup({ rps: 9.5 });
    await flush();
    expect(limiter.state()).toMatchObject({
      configuredRps: 9.5,
      currentRps: 9.5,
      queued: { incremental: 0, sweep: 0 },
      pausedForMs: 0,
    });
  });
});
