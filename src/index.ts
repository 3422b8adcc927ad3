// The package's public surface for consumers in other services: the event contract (types and zod schemas).
export {
  CLOUDEVENTS_CONTENT_TYPE,
  EVENT_SCHEMAS,
  EVENT_TYPES,
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
} from './events.js';
export { ReviewSchema, type Review } from './upstream/review.js';
