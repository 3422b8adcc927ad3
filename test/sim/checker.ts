import type { BridgeConfig } from '../../src/config/config.js';
import type { Review } from '../../src/core/review.js';
import type { SimKafka } from './kafka.js';
import type { SimUpstream } from './upstream.js';

// The contract (docs/guarantees.md) checked on what a read_committed consumer of a deployment's event topics sees
// once the schedule is over: the properties below, in this order; the first one violated is the schedule's verdict.

/** The properties, in the order they are checked. */
export const PROPERTIES = [
  'no id twice',
  'no conflicting ids',
  'nothing invented',
  'no second review.created',
  'sequence without gaps or restarts',
  'deletions only of reviews gone upstream',
  'every final state reached',
] as const;

/** One property. */
export type Property = (typeof PROPERTIES)[number];

/** A violated property, with what shows it. */
export interface Violation {
  deployment: string;
  property: Property;
  detail: string;
}

interface SeenEvent {
  id: string;
  type: string;
  review: number;
  sequence: number;
  data: { review?: Partial<Review> } | undefined;
  /** Position in the consumer's reading order (a topic's records in offset order, topics in commit order). */
  at: number;
}

// The fields compared with the upstream's versions (the default field policy publishes them as they are).
const COMPARED = [
  'client_publication_status',
  'pwr_publication_status',
  'updated_date',
  'headline',
  'helpful_votes',
] as const;

function sameVersion(event: Partial<Review>, version: Review): boolean {
  return COMPARED.every((f) => !(f in event) || event[f] === version[f]);
}

// The final state a feed must reach: statuses and content. Not updated_date: a change and its undoing, both made
// while the bridge could not read (an outage), leave the review as published with a newer date and nothing to say.
function sameState(event: Partial<Review>, version: Review): boolean {
  return COMPARED.every((f) => f === 'updated_date' || !(f in event) || event[f] === version[f]);
}

function describe(r: Partial<Review> | undefined): string {
  if (!r) return 'nothing';
  return COMPARED.map((f) => `${f}=${String(r[f])}`).join(' ');
}

/** What the checker saw (for the report). */
export interface CheckStats {
  events: number;
  reviews: number;
}

/** Checks the contract for one deployment; resolves the first violation, or null. */
export function checkDeployment(
  name: string,
  config: BridgeConfig,
  kafka: SimKafka,
  upstream: SimUpstream,
  stats: CheckStats,
): Violation | null {
  const t = config.kafka.topics;
  const topics = [t.created, t.statusChanged, t.updated, t.deleted];
  const events: SeenEvent[] = [];
  for (const topic of topics) {
    for (const r of kafka.committed(topic)) {
      const e = JSON.parse(String(r.value)) as {
        id: string;
        type: string;
        subject: string;
        sequence: number;
        data?: SeenEvent['data'];
      };
      events.push({ id: e.id, type: e.type, review: Number(e.subject), sequence: e.sequence, data: e.data, at: r.seq });
    }
  }
  events.sort((a, b) => a.at - b.at);
  stats.events += events.length;
  const v = (property: Property, detail: string): Violation => ({ deployment: name, property, detail });

  const ids = new Map<string, SeenEvent>();
  for (const e of events) {
    if (ids.has(e.id))
      return v('no id twice', `${e.type} of review ${e.review} seq ${e.sequence} (id ${e.id}) read twice`);
    ids.set(e.id, e);
  }
  const bySeq = new Map<string, SeenEvent>();
  for (const e of events) {
    const k = `${e.review}/${e.sequence}`;
    const other = bySeq.get(k);
    if (other)
      return v(
        'no conflicting ids',
        `review ${e.review} seq ${e.sequence}: ${other.type} and ${e.type} with different ids`,
      );
    bySeq.set(k, e);
  }
  for (const e of events) {
    if (e.type === 'review.deleted') continue;
    const versions = upstream.history.get(e.review) ?? [];
    const review = e.data?.review;
    if (!review || !versions.some((ver) => sameVersion(review, ver)))
      return v(
        'nothing invented',
        `${e.type} of review ${e.review} seq ${e.sequence} carries ${describe(review)}, a version the upstream never had`,
      );
  }
  const perReview = new Map<number, SeenEvent[]>();
  for (const e of events) {
    let list = perReview.get(e.review);
    if (!list) perReview.set(e.review, (list = []));
    list.push(e);
  }
  stats.reviews += perReview.size;
  for (const [review, list] of perReview) {
    const created = list.filter((e) => e.type === 'review.created');
    if (created.length > 1)
      return v(
        'no second review.created',
        `review ${review}: review.created at seq ${created.map((e) => e.sequence).join(' and ')}`,
      );
  }
  for (const [review, list] of perReview) {
    let expected = 1;
    for (const e of list) {
      if (e.sequence !== expected)
        return v(
          'sequence without gaps or restarts',
          `review ${review}: seq ${e.sequence} (${e.type}) read where ${expected} was due (${list.map((x) => x.sequence).join(',')})`,
        );
      expected += 1;
    }
  }
  for (const [review, list] of perReview) {
    const deletion = list.find((e) => e.type === 'review.deleted');
    if (deletion && !upstream.deleted.has(review))
      return v(
        'deletions only of reviews gone upstream',
        `review ${review} deleted at seq ${deletion.sequence} but still listed upstream`,
      );
  }
  for (const [id, review] of upstream.reviews) {
    const list = perReview.get(id);
    const last = list?.at(-1);
    if (!last || last.type === 'review.deleted' || !last.data?.review || !sameState(last.data.review, review))
      return v(
        'every final state reached',
        `review ${id}: the feed ends at ${last ? `${last.type} seq ${last.sequence} with ${describe(last.data?.review)}` : 'nothing'}, the upstream holds ${describe(review)}`,
      );
  }
  for (const id of upstream.deleted) {
    const list = perReview.get(id);
    if (list && list.at(-1)!.type !== 'review.deleted')
      return v(
        'every final state reached',
        `review ${id} is gone upstream and the feed has no review.deleted after seq ${list.at(-1)!.sequence}`,
      );
  }
  return null;
}
