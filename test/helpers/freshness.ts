import type { TestBridge } from './bridge.js';
import { readAll } from './kafka.js';

// What the freshness tests read back: a metric of the bridge's registry, and the statuses its events carried.

/** A counter or gauge of the bridge's registry, by metric name and one label (0 when absent). */
export async function bridgeMetric(b: TestBridge, name: string, label = ''): Promise<number> {
  const text = await b.app.metrics.registry.metrics();
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{([^}]*)\\})? (\\S+)$`, 'gm'))) {
    if ((m[1] ?? '').includes(label)) return Number(m[2]);
  }
  return 0;
}

/** The sum of a counter over every label set whose labels include `label`. */
export async function bridgeMetricSum(b: TestBridge, name: string, label = ''): Promise<number> {
  const text = await b.app.metrics.registry.metrics();
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{([^}]*)\\})? (\\S+)$`, 'gm'))) {
    if ((m[1] ?? '').includes(label)) sum += Number(m[2]);
  }
  return sum;
}

/** The latest client status of each review on the status_changed topic (read_committed, from the beginning). */
export async function deliveredStatuses(b: TestBridge): Promise<Map<number, string>> {
  const finals = new Map<number, string>();
  for (const m of await readAll([b.topics.statusChanged], { timeoutMs: 10_000 })) {
    const event = JSON.parse(m.value) as { data: { review: { id: number; client_publication_status: string } } };
    finals.set(event.data.review.id, event.data.review.client_publication_status);
  }
  return finals;
}
