import { afterAll, describe, expect, it } from 'vitest';
import type { ReviewEvent } from '../../../src/core/events.js';
import { startSimulator } from '../../../src/simulator/index.js';
import { eventually, startTestBridge, testEnv, type TestBridge } from '../../helpers/bridge.js';
import { readAll } from '../../helpers/kafka.js';

// A status change reached first by a sweep page is published with data.detection = 'sweep'; the process dies
// between that publish and the page's Redis commit. Before the Kafka changelog, the restarted bridge polled first,
// found the same change again and re-published it under the same id with data.detection = 'incremental'. Now the
// page's changelog records went out with its events, so the restarted bridge applies the page from Kafka and
// publishes nothing again: one delivery, detection 'sweep', in both modes (with transactions and at least once).
// Reproduced deterministically with the beforeCommit hook standing in for the kill.

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

describe('fault: re-publish after a crash by another kind of pass', () => {
  for (const mode of ['on', 'off'] as const) {
    it(`publishes the change once, from the pass that found it (KAFKA_EXACTLY_ONCE=${mode})`, async () => {
      const sim = await startSimulator({ reviewCount: 200, seed: 5, rateLimit: null });
      cleanups.push(() => sim.close());
      const X = 150;
      let crashed = false;
      // Polls are rare here and trailing reads off, so the sweep is what reaches the change first.
      // No poll may cut in during the test: the adaptive (idle) interval is stretched as well.
      const env = testEnv(sim.url, {
        POLL_INTERVAL_MS: '60000',
        KAFKA_EXACTLY_ONCE: mode,
        POLL_OVERLAP_MS: '60000',
        UPSTREAM_PAGE_SIZE: '20',
        // Nor a trailing read (they re-read the last seconds every few seconds, and would find the change first).
        FRESHNESS_BOUND_MS: '0',
      });
      const b: TestBridge = await startTestBridge(env, {
        beforeCommit: (page) => {
          if (!crashed && page.reviews.some((r) => r.id === X && r.client_publication_status === 'ON_HOLD')) {
            crashed = true;
            throw new Error('injected crash between publish and commit');
          }
        },
      });
      cleanups.push(() => b.stop());
      // Polls run during the initial load too, and one right after it: wait for the load to be done and for that
      // poll, so that the next poll is a minute away and the sweep is what finds the change.
      await eventually(
        async () => {
          const c = await b.store.checkpoint();
          return c.initialDone && c.lastSweepAt !== null && (c.lastIncrementalAt ?? -1) >= c.lastSweepAt
            ? true
            : undefined;
        },
        30_000,
        'the load and the poll that follows it',
      );
      sim.control.setStatus(X, { client: 'ON_HOLD' });
      await b.store.requestSweep();
      await eventually(async () => (crashed ? true : undefined), 30_000, 'the crash');
      // The restarted process polls before it resumes the sweep.
      await b.restart();
      // A poll after the restart has run (it would have found the change again had the page not been applied).
      const restarted = Date.now();
      await eventually(
        async () => (((await b.store.checkpoint()).lastIncrementalAt ?? 0) > restarted ? true : undefined),
        30_000,
        'a poll after the restart',
      );
      const events = (await readAll([b.topics.statusChanged], { untilCount: 1, idleMs: 2_000, timeoutMs: 30_000 })).map(
        (m) => JSON.parse(m.value) as ReviewEvent,
      );
      expect(events.map((e) => [e.subject, e.data.detection])).toEqual([[String(X), 'sweep']]);
    });
  }
});
