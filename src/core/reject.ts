// Why a record of a page cannot be published: the closed vocabulary every layer (validation, the pipeline, the
// dead-letter topic, metrics) shares.

/**
 * Why a record is rejected or dead-lettered: a closed set, decided where the check is made (never parsed back out
 * of message text), so it can be a metric label and a dead-letter reason without carrying any value.
 */
export const REJECT_KINDS = [
  /** Not a JSON object at all (a string, an array, null). */
  'malformed',
  /** An object that fails the review schema (a required field missing or of the wrong type). */
  'schema',
  /** Too many serialized bytes: the record (validation) or its event (Kafka's message size limit). */
  'too_large',
  /** Nested deeper than the bound (checked without recursion). */
  'too_deep',
  /** A string longer than the per-field bound. */
  'string_too_long',
  /** `updated_date` or `created_date` before 2000-01-01 or further in the future than the allowed skew. */
  'date_out_of_range',
  /** `id` not a positive safe integer. */
  'id_out_of_range',
  /** A `__proto__`, `constructor` or `prototype` key anywhere in the record. */
  'forbidden_key',
  /** A per-record processing step (fingerprint, diff, event building, entry encoding) threw. */
  'processing_failed',
  /** A page kept failing and bisection isolated this record. */
  'quarantined',
] as const;

/** One reject kind (see REJECT_KINDS). */
export type RejectKind = (typeof REJECT_KINDS)[number];

/** A record of a page that failed validation: kept apart so one bad record never fails its page. */
export interface Reject {
  /** Review id when it could be read (for the dead-letter key), otherwise null. */
  id: string | null;
  /** Why it failed: the bounded kind (metric label, dead-letter reason). */
  reason: RejectKind;
  /**
   * Where it failed, for people: `field:check` items such as `updated_date:date_out_of_range` or
   * `rating:invalid_type` (known field names and check names only, never values or unknown field names).
   */
  detail: string;
  /** The raw record as received, for the dead-letter topic. */
  raw: unknown;
  /** Its index among its page's records (where it was listed, between which reviews), when known. */
  position?: number;
}
