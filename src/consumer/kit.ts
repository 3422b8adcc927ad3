import type { IHeaders } from 'kafkajs';
import type { z } from 'zod';
import {
  RECORD_SCHEMAS,
  ReviewStateSchema,
  STATE_RECORD_HEADER,
  TRACEPARENT_PATTERN,
  type PublishedReview,
  type ReviewCreatedEvent,
  type ReviewDeletedEvent,
  type ReviewHeartbeatEvent,
  type ReviewState,
  type ReviewStatusChangedEvent,
  type ReviewUpdatedEvent,
} from '../core/events.js';
import { structuredFromBinary, unframe } from '../core/wire-format.js';

// The consumer kit: parse what the bridge writes to Kafka into a typed union, and fold a review's records into
// the consumer's view with a pure reducer that is indifferent to order and duplicates (the feed is at-least-once
// and review.deleted, the state topic and the three change topics are separate partitions).

/** The parts of a kafkajs message the parser reads (a KafkaMessage or an EachMessagePayload's message). */
export interface KafkaRecordLike {
  key?: Buffer | string | null;
  value: Buffer | string | null;
  headers?: IHeaders;
}

/** Everything the bridge publishes, by kind; `state` and `tombstone` come from the compacted state topic. */
export type ParsedRecord =
  | { kind: 'created'; event: ReviewCreatedEvent }
  | { kind: 'status_changed'; event: ReviewStatusChangedEvent }
  | { kind: 'updated'; event: ReviewUpdatedEvent }
  | { kind: 'deleted'; event: ReviewDeletedEvent }
  | { kind: 'heartbeat'; event: ReviewHeartbeatEvent }
  | { kind: 'state'; reviewId: number; state: ReviewState }
  | { kind: 'tombstone'; reviewId: number };

/** A message that is not (or not a valid) reviews-bridge record; the message names why, never the values. */
export class ForeignMessageError extends Error {
  constructor(reason: string) {
    super(`not a reviews-bridge record: ${reason}`);
    this.name = 'ForeignMessageError';
  }
}

const KINDS = {
  'review.created': 'created',
  'review.status_changed': 'status_changed',
  'review.updated': 'updated',
  'review.deleted': 'deleted',
  'review.heartbeat': 'heartbeat',
} as const;

type CloudEventType = keyof typeof KINDS;

const text = (v: Buffer | string | null | undefined): string | null =>
  v === null || v === undefined ? null : typeof v === 'string' ? v : v.toString('utf8');

function header(headers: IHeaders | undefined, name: string): string | null {
  const v = headers?.[name];
  const first = Array.isArray(v) ? v[0] : v;
  return first === undefined ? null : text(first);
}

function issues(error: z.ZodError): string {
  // Paths and codes only: values may hold personal data (e-mail addresses in reviews).
  return error.issues
    .slice(0, 5)
    .map((i) => `${i.path.join('.') || '(root)'}: ${i.code}`)
    .join('; ');
}

// Keys are the review id, or `<account>:<review id>` where several accounts share the topics (README, "Accounts
// and topics"); the account part only keeps their rows apart in the compacted state topic.
const REVIEW_KEY = /^(?:[A-Za-z0-9_.-]{1,64}:)?(\d{1,15})$/;

function reviewIdOfKey(key: string | null): number {
  const id = key === null ? undefined : REVIEW_KEY.exec(key)?.[1];
  if (id === undefined) throw new ForeignMessageError('state record without a review id key');
  return Number(id);
}

/** Every header of a message as text (the first value of a repeated one). */
function headerTexts(headers: IHeaders | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of Object.keys(headers ?? {})) {
    const value = header(headers, name);
    if (value !== null) out[name] = value;
  }
  return out;
}

/**
 * Parses one Kafka record of any of the bridge's topics: checks the CloudEvents envelope and the event's zod
 * schema (or the state row's), and that the key is the subject. Throws ForeignMessageError for anything else.
 * Reads both wire formats: structured CloudEvents JSON (the default) and SCHEMA_REGISTRY_WIRE_FORMAT=confluent
 * (magic byte and schema id before the JSON of the event's data, its attributes in ce_ headers), which it turns
 * into the same structured event.
 */
export function parseReviewEvent(message: KafkaRecordLike): ParsedRecord {
  const key = text(message.key);
  const framed = Buffer.isBuffer(message.value) ? unframe(message.value) : null;
  const value = framed ? framed.json : text(message.value);
  if (header(message.headers, STATE_RECORD_HEADER) === 'review.state') {
    const reviewId = reviewIdOfKey(key);
    if (value === null) return { kind: 'tombstone', reviewId };
    const parsed = ReviewStateSchema.safeParse(safeJson(value));
    if (!parsed.success) throw new ForeignMessageError(`invalid review.state row (${issues(parsed.error)})`);
    if (parsed.data.review_id !== reviewId) throw new ForeignMessageError('state row key differs from its review_id');
    return { kind: 'state', reviewId, state: parsed.data };
  }
  if (value === null) throw new ForeignMessageError('null value outside the state topic');
  const json = framed ? binaryEvent(message.headers, value) : safeJson(value);
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new ForeignMessageError('value is not a JSON object');
  const envelope = json as Record<string, unknown>;
  if (envelope.specversion !== '1.0') throw new ForeignMessageError('not a CloudEvents 1.0 event (specversion)');
  const type = envelope.type;
  if (typeof type !== 'string' || !(type in KINDS)) {
    throw new ForeignMessageError(
      `unknown event type ${JSON.stringify(typeof type === 'string' ? type.slice(0, 64) : type)}`,
    );
  }
  const t = type as CloudEventType;
  const parsed = RECORD_SCHEMAS[t].safeParse(json);
  if (!parsed.success) throw new ForeignMessageError(`invalid ${t} (${issues(parsed.error)})`);
  const event = parsed.data as { subject: string };
  if (key !== null && key !== event.subject && !key.endsWith(`:${event.subject}`))
    throw new ForeignMessageError(`${t} key differs from its subject`);
  return { kind: KINDS[t], event } as ParsedRecord;
}

/**
 * The W3C `traceparent` of the bridge's page span that produced an event (CloudEvents distributed tracing): the
 * Kafka header, else the envelope's attribute of the parsed event; null when the bridge was not tracing. A consumer
 * starts its own span with a link to it, so a trace viewer leads from the consumer's work to the poll that found the
 * change. Not part of the event's identity: deduplicate by id, never by it.
 */
export function traceparentOf(message: KafkaRecordLike, record?: ParsedRecord): string | null {
  const fromHeader = header(message.headers, 'traceparent');
  if (fromHeader !== null && TRACEPARENT_PATTERN.test(fromHeader)) return fromHeader;
  const event = record && 'event' in record ? (record.event as { traceparent?: string }) : undefined;
  return event?.traceparent ?? null;
}

/** The structured event of a framed value and its ce_ headers. */
function binaryEvent(headers: IHeaders | undefined, dataJson: string): unknown {
  let event: Record<string, unknown> | null;
  try {
    event = structuredFromBinary(headerTexts(headers), dataJson);
  } catch {
    throw new ForeignMessageError('framed value is not JSON');
  }
  if (event === null) throw new ForeignMessageError('framed value without CloudEvents ce_ headers');
  return event;
}

function safeJson(value: string): unknown {
  try {
    return JSON.parse(value);
  } catch {
    throw new ForeignMessageError('value is not JSON');
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The view: per review, the newest state known. Every record the bridge writes carries the review's whole state
// with its per-review sequence, so "keep the highest sequence" is all a consumer needs: applying records in any
// order, with any duplicates, converges to the view of the in-order stream.

/** What a consumer knows of one review. */
export interface ReviewView {
  reviewId: number;
  /** The review as last published; null once deleted (or known only from a tombstone). */
  review: PublishedReview | null;
  deleted: boolean;
  /** Sequence of the record this view comes from (0: a tombstone with nothing known before). */
  sequence: number;
  /** Id of the event this view comes from (null for a tombstone). */
  eventId: string | null;
}

/** A reaction the consumer owes: a review moved to REJECTED (in one of its two status fields). */
export interface RejectedTransition {
  kind: 'rejected';
  reviewId: number;
  field: 'client_publication_status' | 'pwr_publication_status';
  from: string;
  sequence: number;
  eventId: string;
}

/** Result of applying one record to a review's view. */
export interface ReduceResult {
  view: ReviewView | undefined;
  /** applied: the view changed; duplicate: this id was already applied; stale: older than the view. */
  outcome: 'applied' | 'duplicate' | 'stale' | 'ignored';
  effects: RejectedTransition[];
}

/** Records that concern one review (heartbeats concern none). */
export type ReviewRecord = Exclude<ParsedRecord, { kind: 'heartbeat' }>;

/** The review a record is about. */
export function reviewIdOf(record: ReviewRecord): number {
  if (record.kind === 'state' || record.kind === 'tombstone') return record.reviewId;
  return Number(record.event.subject);
}

function candidate(record: ReviewRecord, prev: ReviewView | undefined): ReviewView {
  const reviewId = reviewIdOf(record);
  switch (record.kind) {
    case 'state':
      return {
        reviewId,
        review: record.state.review,
        deleted: false,
        sequence: record.state.sequence,
        eventId: record.state.event_id,
      };
    case 'tombstone':
      // No sequence on a tombstone: it deletes what is known at the same sequence, and loses to anything newer.
      return { reviewId, review: null, deleted: true, sequence: prev?.sequence ?? 0, eventId: prev?.eventId ?? null };
    case 'deleted':
      return { reviewId, review: null, deleted: true, sequence: record.event.sequence, eventId: record.event.id };
    default:
      return {
        reviewId,
        review: record.event.data.review,
        deleted: false,
        sequence: record.event.sequence,
        eventId: record.event.id,
      };
  }
}

// Total order of views of one review. Equal sequences with different ids happen only after a bridge crash let a
// different change reuse a sequence; the tie-break (updated_date, deletion, id) is arbitrary but deterministic, so
// every consumer converges on the same view whatever order it read the records in.
function newer(a: ReviewView, b: ReviewView): boolean {
  if (a.sequence !== b.sequence) return a.sequence > b.sequence;
  if (a.deleted !== b.deleted) return a.deleted;
  const ua = a.review?.updated_date ?? 0;
  const ub = b.review?.updated_date ?? 0;
  if (ua !== ub) return ua > ub;
  return (a.eventId ?? '') > (b.eventId ?? '');
}

const STATUS_FIELDS = ['client_publication_status', 'pwr_publication_status'] as const;

/**
 * Applies one record to a review's view (pure). Keeps the newest state; reports a REJECTED transition when the
 * view of an already-known review moves to REJECTED (reviews first seen rejected, e.g. while bootstrapping, do
 * not count: they were not a transition this consumer witnessed).
 */
export function reduceReview(prev: ReviewView | undefined, record: ReviewRecord): ReduceResult {
  if (record.kind === 'tombstone') {
    if (prev?.deleted) return { view: prev, outcome: 'duplicate', effects: [] };
    return { view: candidate(record, prev), outcome: 'applied', effects: [] };
  }
  const next = candidate(record, prev);
  if (prev && prev.eventId === next.eventId && prev.sequence === next.sequence && prev.deleted === next.deleted) {
    return { view: prev, outcome: 'duplicate', effects: [] };
  }
  if (prev && !newer(next, prev)) return { view: prev, outcome: 'stale', effects: [] };
  const effects: RejectedTransition[] = [];
  if (prev?.review && next.review) {
    for (const field of STATUS_FIELDS) {
      const from = prev.review[field];
      if (next.review[field] === 'REJECTED' && from !== 'REJECTED') {
        effects.push({
          kind: 'rejected',
          reviewId: next.reviewId,
          field,
          from,
          sequence: next.sequence,
          eventId: next.eventId ?? '',
        });
      }
    }
  }
  return { view: next, outcome: 'applied', effects };
}

/** A consumer's view of the whole feed: a map of review views fed record by record (the reducer's state holder). */
export class FeedView {
  readonly reviews = new Map<number, ReviewView>();
  /** The last heartbeat seen (a consumer alerts when it grows old: the bridge is stuck, not just quiet). */
  lastHeartbeat: ReviewHeartbeatEvent | null = null;

  /** Applies one parsed record; returns the reducer's result (heartbeats: outcome 'ignored' for reviews). */
  apply(record: ParsedRecord): ReduceResult {
    if (record.kind === 'heartbeat') {
      if (!this.lastHeartbeat || record.event.time > this.lastHeartbeat.time) this.lastHeartbeat = record.event;
      return { view: undefined, outcome: 'ignored', effects: [] };
    }
    const id = reviewIdOf(record);
    const result = reduceReview(this.reviews.get(id), record);
    if (result.view) this.reviews.set(id, result.view);
    return result;
  }

  /** The live reviews (deleted ones left out), by id. */
  live(): Map<number, PublishedReview> {
    const out = new Map<number, PublishedReview>();
    for (const [id, v] of this.reviews) if (!v.deleted && v.review) out.set(id, v.review);
    return out;
  }
}
