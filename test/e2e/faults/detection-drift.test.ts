import { afterAll, describe, expect, it } from 'vitest';
import type { ReviewEvent } from '../../../src/core/events.js';
import { startSimulator } from '../../../src/simulator/index.js';
import { eventually, startTestBridge, testEnv, type TestBridge } from '../../helpers/bridge.js';
import { readAll } from '../../helpers/kafka.js';

// A status change reached first by a sweep page is published with data.detection = 'sweep'. When the process
// dies between that publish and the page's commit, the restarted bridge runs an incremental poll first, which
// finds the same change and re-publishes it under the same id (same sequence, same state) with
// data.detection = 'incremental'. That is the documented contract (README, deviations): `detection` names the pass
// that delivered a copy; id, sequence and content are identical. Reproduced deterministically with the
// beforeCommit hook standing in for the kill.

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

describe('fault: re-publish after a crash by another kind of pass', () => {
  it('re-delivers the same id and content; only data.detection names the other pass', async () => {
    const sim = await startSimulator({ reviewCount: 200, seed: 5, rateLimit: null });
    cleanups.push(() => sim.close());
    const X = 150;
    let crashed = false;
    // Polls are rare here, so the sweep is what reaches the change first.
    // No poll may cut in during the test: the adaptive (idle) interval is stretched as well.
    const env = testEnv(sim.url, {
      POLL_INTERVAL_MS: '60000',
      POLL_MIN_INTERVAL_MS: '60000',
      POLL_OVERLAP_MS: '60000',
      UPSTREAM_PAGE_SIZE: '20',
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
    await eventually(async () => ((await b.store.checkpoint()).lastIncrementalAt ? true : undefined), 30_000, 'a poll');
    sim.control.setStatus(X, { client: 'ON_HOLD' });
    await b.store.requestSweep();
    await eventually(async () => (crashed ? true : undefined), 30_000, 'the crash');
    // The restarted process polls before it resumes the sweep.
    await b.restart();
    const events = (await readAll([b.topics.statusChanged], { untilCount: 2, idleMs: 1_000, timeoutMs: 30_000 })).map(
      (m) => JSON.parse(m.value) as ReviewEvent,
    );
    expect(events).toHaveLength(2);
    expect(events[1]!.id).toBe(events[0]!.id);
    expect(events.map((e) => e.data.detection)).toEqual(['sweep', 'incremental']);
    const withoutDetection = (e: ReviewEvent) => ({ ...e, data: { ...e.data, detection: null } });
    expect(withoutDetection(events[1]!)).toEqual(withoutDetection(events[0]!));
  });
});
