import { createHash } from 'node:crypto';
import { z } from 'zod';
import { ReviewSchema, type Review } from './upstream/review.js';

// The event contract consumers depend on. These zod schemas are the single source of truth: the TypeScript
// types below are inferred from them and `npm run schemas` generates schemas/*.v1.json from them.

/** The three change-event types the bridge publishes. */
export const EVENT_TYPES = ['review.created', 'review.status_changed', 'review.updated'] as const;

/** One of the change-event types. */
export type EventType = (typeof EVENT_TYPES)[number];

/** How a change was found: the initial load of an empty snapshot, an incremental poll, or a reconciliation sweep. */
export const Detection = z
  .enum(['initial', 'incremental', 'sweep'])
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

const StatusChange = z.object({ from: z.string().nullable(), to: z.string() });

const baseData = {
  review: ReviewSchema,
  changed_fields: z.array(z.string()),
  detection: Detection,
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

function envelope<T extends EventType, D extends z.ZodType>(type: T, data: D) {
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

/** Version suffix of the published schemas; bump it (and keep the old file) on a breaking change. */
export const SCHEMA_VERSION = 'v1';

/** Content type of an event's Kafka record (CloudEvents structured mode). */
export const CLOUDEVENTS_CONTENT_TYPE = 'application/cloudevents+json';

/** The `dataschema` URI of an event type: names the checked-in JSON Schema file. */
export function dataschemaOf(type: EventType): string {
  return `urn:reviews-bridge:schema:${type}.${SCHEMA_VERSION}`;
}

/**
 * A deterministic event id (a name-based UUID, version 5 layout): the same change re-published after a crash
 * gets the same id. The review's state digest is part of the name so that, should a crash let a different change
 * reuse a sequence number, consumers do not deduplicate a real change away as a repeat.
 */
export function eventId(source: string, reviewId: number, sequence: number, stateDigest: string): string {
  const hash = createHash('sha1').update(`${source}\n${reviewId}\n${sequence}\n${stateDigest}`).digest();
  hash[6] = (hash[6]! & 0x0f) | 0x50;
  hash[8] = (hash[8]! & 0x3f) | 0x80;
  const h = hash.subarray(0, 16).toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

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
