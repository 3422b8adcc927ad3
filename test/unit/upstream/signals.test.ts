import { describe, expect, it } from 'vitest';
import { getEventListeners } from 'node:events';
import { deadlineSignal, linkSignals } from '../../../src/upstream/signals.js';

describe('linkSignals', () => {
  it('aborts when any source aborts, with that reason', () => {
    const a = new AbortController();
    const b = new AbortController();
    const linked = linkSignals(a.signal, undefined, b.signal);
    b.abort(new Error('b went'));
    expect(linked.signal.aborted).toBe(true);
    expect((linked.signal.reason as Error).message).toBe('b went');
  });

  it('starts aborted when a source already is', () => {
    const linked = linkSignals(new AbortController().signal, AbortSignal.abort(new Error('early')));
    expect(linked.signal.aborted).toBe(true);
  });

  it('leaves nothing registered on a long-lived source after dispose (no per-request leak)', () => {
    const shutdown = new AbortController();
    for (let i = 0; i < 1000; i++) linkSignals(shutdown.signal).dispose();
    expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(0);
    const last = linkSignals(shutdown.signal);
    last.dispose();
    shutdown.abort();
    expect(last.signal.aborted).toBe(false);
  });
});

describe('deadlineSignal', () => {
  it('aborts with a TimeoutError after the delay, unless disposed', async () => {
    const fired = deadlineSignal(5);
    const cleared = deadlineSignal(5);
    cleared.dispose();
    // Timers of the same delay fire in order: once the first has, the disposed one would have too.
    await new Promise((r) => fired.signal.addEventListener('abort', r, { once: true }));
    await new Promise((r) => setImmediate(r));
    expect(fired.signal.aborted).toBe(true);
    expect((fired.signal.reason as DOMException).name).toBe('TimeoutError');
    expect(cleared.signal.aborted).toBe(false);
  });
});
