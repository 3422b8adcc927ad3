import { hash } from 'node:crypto';
import { z } from 'zod';
import { PASS_TYPES } from './domain.js';
import { ReviewSchema, type Review } from './review.js';

// The event contract consumers depend on. These zod schemas are the single source of truth: the TypeScript
// types below are inferred from them and `npm run schemas` generates schemas/*.v1.json from them.

/** The three change-event types the bridge publishes. */
export const EVENT_TYPES = ['review.created', 'review.status_changed', 'review.updated'] as const;

/** One of the change-event types. */
export type EventType = (typeof EVENT_TYPES)[number];

/** How a change was found: the initial load of an empty snapshot, an incremental poll, or a reconciliation sweep. */
export const Detection = z
  .enum(PASS_TYPES)
  .describe('which pass delivered this copy; a re-delivery of the same id after a crash may name another pass');

/** How a change was found. */
export type Detection = z.infer<typeof Detection>;

/** What the snapshot knew before this event (the snapshot keeps statuses and fingerprints, not old field values). */
export const PreviousStateSchema = z.object({
  client_publication_status: z.string(),
  pwr_publication_status: z.string(),
  updated_date: z.number().int(),
  sequence: z.number().int().nonnegative(),
});

/** What the snapshot knew before this event. */
export type PreviousState = z.infer<typeof PreviousStateSchema>;

const PolicyValue = z
  .string()
  .describe(
    'the value under the field policy: "hmac-sha256:<64 hex digits>" when hashed, "<first N characters>***" when masked',
  );

// Every field but id, updated_date and the two statuses may be hashed, masked or left out by the field policy
// (EVENT_FIELDS_*): consumers must accept a string in place of any other value, and its absence.
const byPolicy = <T extends z.ZodType>(schema: T) =>
  z.union([schema, PolicyValue]).optional().describe('may be absent, hashed or masked by the field policy');
const r = ReviewSchema.shape;

/** The review as published: the upstream record after the field policy (src/core/field-policy.ts). */
export const PublishedReviewSchema = ReviewSchema.extend({
  headline: byPolicy(r.headline),
  rating: byPolicy(r.rating),
  comments: byPolicy(r.comments),
  nickname: byPolicy(r.nickname),
  email: byPolicy(r.email).describe(
    'never the address as received by default: "hmac-sha256:<64 hex>" (a keyed HMAC, the same for the same ' +
      'address) when EVENT_HASH_KEY_FILE is set, absent otherwise; raw only with EVENT_FIELDS_ALLOW_RAW_EMAIL=true',
  ),
  location: byPolicy(r.location),
  bottom_line: byPolicy(r.bottom_line),
  locale: byPolicy(r.locale),
  type: byPolicy(r.type),
  product_page_id: byPolicy(r.product_page_id),
  merchant_group_id: byPolicy(r.merchant_group_id),
  merchant_id: byPolicy(r.merchant_id),
  created_date: byPolicy(r.created_date),
  helpful_votes: byPolicy(r.helpful_votes),
  not_helpful_votes: byPolicy(r.not_helpful_votes),
  review_source: byPolicy(r.review_source),
}).describe(
  'the upstream review after the field policy; unknown upstream fields are kept unless EVENT_FIELDS_INCLUDE is ' +
    'set, and e-mail addresses anywhere in it are hashed or replaced by "(email)" unless raw e-mail is allowed',
);

/** A review as published (see PublishedReviewSchema). */
export type PublishedReview = z.infer<typeof PublishedReviewSchema>;

const StatusChange = z.object({ from: z.string().nullable(), to: z.string() });

const baseData = {
  review: PublishedReviewSchema,
  changed_fields: z.array(z.string()),
  detection: Detection,
  truncated_fields: z
    .array(z.string())
    .optional()
    .describe(
      'present only when the event would exceed the Kafka message size limit: the free-text fields of review that were cut to fit (their full text stays upstream)',
    ),
};

/** `data` of review.created. */
export const CreatedDataSchema = z.object({ ...baseData, previous: z.null() });

/** `data` of review.status_changed: from and to of both status fields (equal when that field did not change). */
export const StatusChangedDataSchema = z.object({
  ...baseData,
  previous: PreviousStateSchema,
  status: z.object({
    client_publication_status: StatusChange,
    pwr_publication_status: StatusChange,
  }),
});

/** `data` of review.updated: a change of fields other than the statuses. */
export const UpdatedDataSchema = z.object({ ...baseData, previous: PreviousStateSchema });

/** W3C Trace Context `traceparent` (version-traceid-spanid-flags, lower-case hex). */
export const TRACEPARENT_PATTERN = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

// The CloudEvents distributed-tracing extension attribute: optional, additive to v1 (consumers may ignore it).
const Traceparent = z
  .string()
  .regex(TRACEPARENT_PATTERN)
  .describe(
    'CloudEvents distributed-tracing extension: the W3C traceparent of the span of the page that produced this copy ' +
      '(present only when the bridge traces); not part of the event identity: a re-delivery of the same id may carry another',
  );

function envelope<T extends EventType | 'review.deleted', D extends z.ZodType>(type: T, data: D) {
  return z.object({
    specversion: z.literal('1.0'),
    id: z.string().uuid(),
    source: z.string().min(1),
    type: z.literal(type),
    subject: z.string().min(1).describe('the review id'),
    time: z.iso.datetime({ offset: true }),
    sequence: z.number().int().positive().describe('per-review sequence, 1, 2, 3, ... across all event types'),
    datacontenttype: z.literal('application/json'),
    dataschema: z.string().min(1),
    data,
    traceparent: Traceparent.optional(),
  });
}

/** CloudEvents 1.0 envelope (structured JSON mode) of review.created. */
export const ReviewCreatedEventSchema = envelope('review.created', CreatedDataSchema);
/** CloudEvents 1.0 envelope of review.status_changed. */
export const ReviewStatusChangedEventSchema = envelope('review.status_changed', StatusChangedDataSchema);
/** CloudEvents 1.0 envelope of review.updated. */
export const ReviewUpdatedEventSchema = envelope('review.updated', UpdatedDataSchema);

/** A review.created event as consumers receive it. */
export type ReviewCreatedEvent = z.infer<typeof ReviewCreatedEventSchema>;
/** A review.status_changed event as consumers receive it. */
export type ReviewStatusChangedEvent = z.infer<typeof ReviewStatusChangedEventSchema>;
/** A review.updated event as consumers receive it. */
export type ReviewUpdatedEvent = z.infer<typeof ReviewUpdatedEventSchema>;
/** Any change event of the bridge. */
export type ReviewEvent = ReviewCreatedEvent | ReviewStatusChangedEvent | ReviewUpdatedEvent;

/** The schemas by event type, as written to schemas/<type>.v1.json. */
export const EVENT_SCHEMAS = {
  'review.created': ReviewCreatedEventSchema,
  'review.status_changed': ReviewStatusChangedEventSchema,
  'review.updated': ReviewUpdatedEventSchema,
} as const;

/**
 * Version suffix of the published schemas; bump it (and keep the old file) on a breaking change. Additions that
 * every v1 consumer can ignore (an optional field such as data.truncated_fields) keep v1.
 */
export const SCHEMA_VERSION = 'v1';

/** Every record type with a JSON Schema under schemas/: the change events, review.deleted, heartbeat and state. */
export type RecordType = EventType | 'review.deleted' | 'review.heartbeat' | 'review.state';

/** Content type of an event's Kafka record (CloudEvents structured mode). */
export const CLOUDEVENTS_CONTENT_TYPE = 'application/cloudevents+json';

/** The `dataschema` URI of an event type: names the checked-in JSON Schema file. */
export function dataschemaOf(type: RecordType): string {
  return `urn:reviews-bridge:schema:${type}.${SCHEMA_VERSION}`;
}

/**
 * A deterministic event id (a name-based UUID, version 5 layout): the same change re-published after a crash
 * gets the same id. The review's state digest is part of the name so that, should a crash let a different change
 * reuse a sequence number, consumers do not deduplicate a real change away as a repeat.
 */
export function eventId(source: string, reviewId: number, sequence: number, stateDigest: string): string {
  // One-shot hash: the same SHA-1 as createHash, without a Hash object per event. Hex out, not a Buffer: a Buffer
  // made by the native call cost more than the hash itself (0.7 µs). The version nibble (byte 6's high half) is 5;
  // the variant bits (byte 8's top two) are 10, so its high hex digit is 8, 9, a or b.
  const h = hash('sha1', `${source}\n${reviewId}\n${sequence}\n${stateDigest}`, 'hex');
  const variant = VARIANT_DIGITS[(parseInt(h[16]!, 16) & 0x3) as 0 | 1 | 2 | 3];
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

const VARIANT_DIGITS = ['8', '9', 'a', 'b'] as const;

/** Inputs common to every event of one review change. */
export interface EventContext {
  source: string;
  review: Review;
  previous: PreviousState | null;
  detection: Detection;
  /** Digest of the review's state (updated_date, statuses, fingerprint): part of the event id. */
  stateDigest: string;
}

function common(ctx: EventContext, type: EventType, sequence: number, time: number) {
  return {
    specversion: '1.0' as const,
    id: eventId(ctx.source, ctx.review.id, sequence, `${type}:${ctx.stateDigest}`),
    source: ctx.source,
    subject: String(ctx.review.id),
    time: new Date(time).toISOString(),
    sequence,
    datacontenttype: 'application/json' as const,
    dataschema: dataschemaOf(type),
  };
}

/** Builds review.created; `time` is when the review was submitted (falls back to its updated_date). */
export function createdEvent(ctx: EventContext, sequence: number): ReviewCreatedEvent {
  const time = ctx.review.created_date ?? ctx.review.updated_date;
  return {
    ...common(ctx, 'review.created', sequence, time),
    type: 'review.created',
    data: { review: ctx.review, previous: null, changed_fields: [], detection: ctx.detection },
  };
}

/** Builds review.status_changed; `time` is the review's updated_date, which the upstream moves on status changes. */
export function statusChangedEvent(
  ctx: EventContext & { previous: PreviousState },
  sequence: number,
  changedFields: string[],
): ReviewStatusChangedEvent {
  return {
    ...common(ctx, 'review.status_changed', sequence, ctx.review.updated_date),
    type: 'review.status_changed',
    data: {
      review: ctx.review,
      previous: ctx.previous,
      changed_fields: changedFields,
      detection: ctx.detection,
      status: {
        client_publication_status: {
          from: ctx.previous.client_publication_status,
          to: ctx.review.client_publication_status,
        },
        pwr_publication_status: { from: ctx.previous.pwr_publication_status, to: ctx.review.pwr_publication_status },
      },
    },
  };
}

/**
 * Builds review.updated. Edits do not move updated_date upstream, so an edit has no upstream timestamp; `time` is
 * the review's updated_date all the same, not the detection time: a page re-processed after a crash is fetched
 * again, and a re-published event must be identical to the first delivery of its id (fault suite finding).
 */
export function updatedEvent(
  ctx: EventContext & { previous: PreviousState },
  sequence: number,
  changedFields: string[],
): ReviewUpdatedEvent {
  return {
    ...common(ctx, 'review.updated', sequence, ctx.review.updated_date),
    type: 'review.updated',
    data: { review: ctx.review, previous: ctx.previous, changed_fields: changedFields, detection: ctx.detection },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// review.deleted, review.heartbeat and the current-state record (issue 11). Same envelope as the change events.

/** `data` of review.deleted: what the snapshot knew of the review when a complete sweep no longer listed it. */
export const DeletedDataSchema = z.object({
  review_id: z.number().int().nonnegative(),
  previous: PreviousStateSchema,
  detection: z.literal('sweep').describe('deletions are only ever detected by a complete sweep'),
});

/** CloudEvents 1.0 envelope of review.deleted; `time` is when the sweep that missed the review completed. */
export const ReviewDeletedEventSchema = envelope('review.deleted', DeletedDataSchema);

/** A review.deleted event as consumers receive it. */
export type ReviewDeletedEvent = z.infer<typeof ReviewDeletedEventSchema>;

/** `data` of review.heartbeat: lets a consumer tell "nothing changed" from "bridge stuck". */
export const HeartbeatDataSchema = z.object({
  account: z.string().min(1),
  watermark: z.iso
    .datetime({ offset: true })
    .nullable()
    .describe('incremental-poll watermark; null before the initial load'),
  last_complete_poll: z.iso
    .datetime({ offset: true })
    .nullable()
    .describe('when the last complete incremental poll finished; null before the first'),
  lease_epoch: z.number().int().nonnegative().describe('epoch of the lease of the leader that sent it'),
  paused: z.boolean().describe('true while an operator paused the bridge (no upstream requests)'),
});

/**
 * CloudEvents 1.0 envelope of review.heartbeat. `subject` is the account (not a review) and there is no
 * `sequence` (it is per review); consumers order heartbeats by `time`.
 */
export const ReviewHeartbeatEventSchema = z.object({
  specversion: z.literal('1.0'),
  id: z.string().uuid(),
  source: z.string().min(1),
  type: z.literal('review.heartbeat'),
  subject: z.string().min(1).describe('the account'),
  time: z.iso.datetime({ offset: true }),
  datacontenttype: z.literal('application/json'),
  dataschema: z.string().min(1),
  data: HeartbeatDataSchema,
});

/** A review.heartbeat event as consumers receive it. */
export type ReviewHeartbeatEvent = z.infer<typeof ReviewHeartbeatEventSchema>;

/**
 * Value of a record of the compacted state topic (key = review id): the review as the last published event showed
 * it. Not a CloudEvent: it is a table row, and a deleted review's row is a tombstone (null value).
 */
export const ReviewStateSchema = z.object({
  review_id: z.number().int().nonnegative(),
  review: PublishedReviewSchema,
  client_publication_status: z.string(),
  pwr_publication_status: z.string(),
  updated_date: z.number().int(),
  sequence: z.number().int().nonnegative().describe('sequence of the event that produced this state'),
  event_id: z
    .string()
    .uuid()
    .nullable()
    .describe('id of the event that produced this state; null on a row a resync refreshed without a change'),
  event_type: z
    .enum(EVENT_TYPES)
    .nullable()
    .describe('type of the event that produced this state; null on a row a resync refreshed without a change'),
  source: z.string().min(1),
});

/** One row of the state topic. */
export type ReviewState = z.infer<typeof ReviewStateSchema>;

/** Header naming the kind of a state-topic record (tombstones carry it too, so they are recognisable). */
export const STATE_RECORD_HEADER = 'reviews-bridge-record';

/** Every JSON Schema the bridge publishes, by record type (schemas/<type>.v1.json). */
export const RECORD_SCHEMAS = {
  ...EVENT_SCHEMAS,
  'review.deleted': ReviewDeletedEventSchema,
  'review.heartbeat': ReviewHeartbeatEventSchema,
  'review.state': ReviewStateSchema,
} as const;

/** The state-topic row a change event produces (the last event of a review wins). */
export function stateOf(event: ReviewEvent): ReviewState {
  return {
    ...refreshedState(event.source, event.data.review, event.sequence),
    event_id: event.id,
    event_type: event.type,
  };
}

/**
 * The state-topic row of an unchanged review that a resync re-read: the review as listed now, at the sequence the
 * snapshot holds. The snapshot does not keep which event produced that state, so the row names none.
 */
export function refreshedState(source: string, review: ReviewState['review'], sequence: number): ReviewState {
  return {
    review_id: review.id,
    review,
    client_publication_status: review.client_publication_status,
    pwr_publication_status: review.pwr_publication_status,
    updated_date: review.updated_date,
    sequence,
    event_id: null,
    event_type: null,
    source,
  };
}

/** The previous state a snapshot entry stands for (used by review.deleted). */
export interface DeletedReview {
  id: number;
  previous: PreviousState;
  /** The same state digest the diff uses (updated_date, statuses, fingerprint): part of the event id. */
  stateDigest: string;
}

/**
 * Builds review.deleted with the next sequence. The id is deterministic in (source, review, sequence, state), so
 * the same deletion re-detected after a crash keeps its id; `time` is the detection time and may differ then.
 */
export function deletedEvent(source: string, deleted: DeletedReview, detectedAt: number): ReviewDeletedEvent {
  const sequence = deleted.previous.sequence + 1;
  return {
    specversion: '1.0',
    id: eventId(source, deleted.id, sequence, `review.deleted:${deleted.stateDigest}`),
    source,
    type: 'review.deleted',
    subject: String(deleted.id),
    time: new Date(detectedAt).toISOString(),
    sequence,
    datacontenttype: 'application/json',
    dataschema: dataschemaOf('review.deleted'),
    data: { review_id: deleted.id, previous: deleted.previous, detection: 'sweep' },
  };
}

/** What a heartbeat reports. */
export interface HeartbeatInput {
  source: string;
  account: string;
  /** Watermark (ms), null before the initial load. */
  watermark: number | null;
  /** When the last complete incremental poll finished (ms), null before the first. */
  lastCompletePoll: number | null;
  leaseEpoch: number;
  paused: boolean;
  /** When the heartbeat is sent (ms). */
  now: number;
}

/** Builds a heartbeat; its id is unique per (source, epoch, time), a heartbeat is never re-sent. */
export function heartbeatEvent(input: HeartbeatInput): ReviewHeartbeatEvent {
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  return {
    specversion: '1.0',
    id: eventId(input.source, 0, input.leaseEpoch, `review.heartbeat:${input.now}`),
    source: input.source,
    type: 'review.heartbeat',
    subject: input.account,
    time: new Date(input.now).toISOString(),
    datacontenttype: 'application/json',
    dataschema: dataschemaOf('review.heartbeat'),
    data: {
      account: input.account,
      watermark: iso(input.watermark),
      last_complete_poll: iso(input.lastCompletePoll),
      lease_epoch: input.leaseEpoch,
      paused: input.paused,
    },
  };
}
