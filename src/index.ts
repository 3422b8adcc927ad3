// The package's public surface for consumers in other services: the event contract (types and zod schemas),
// the consumer kit (parser and order-insensitive reducer) and the reject kinds dead letters carry as their reason.
export {
  CLOUDEVENTS_CONTENT_TYPE,
  EVENT_SCHEMAS,
  EVENT_TYPES,
  RECORD_SCHEMAS,
  ReviewDeletedEventSchema,
  ReviewHeartbeatEventSchema,
  ReviewStateSchema,
  STATE_RECORD_HEADER,
  type RecordType,
  type ReviewDeletedEvent,
  type ReviewHeartbeatEvent,
  type ReviewState,
  ReviewCreatedEventSchema,
  ReviewStatusChangedEventSchema,
  ReviewUpdatedEventSchema,
  SCHEMA_VERSION,
  dataschemaOf,
  type Detection,
  type EventType,
  type PreviousState,
  type ReviewCreatedEvent,
  type ReviewEvent,
  type ReviewStatusChangedEvent,
  type ReviewUpdatedEvent,
} from './core/events.js';
export { ReviewSchema, type Review } from './core/review.js';
export { PublishedReviewSchema, type PublishedReview } from './core/events.js';
export {
  FeedView,
  ForeignMessageError,
  parseReviewEvent,
  reduceReview,
  reviewIdOf,
  type KafkaRecordLike,
  type ParsedRecord,
  type ReduceResult,
  type RejectedTransition,
  type ReviewRecord,
  type ReviewView,
} from './consumer/kit.js';
export { REJECT_KINDS, type RejectKind } from './upstream/types.js';
