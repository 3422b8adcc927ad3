import { z } from 'zod';

// The upstream review record. The fields the bridge relies on (id, updated_date, the two statuses) are strict;
// everything else is lenient because the spec does not say which fields may be null or missing, and unknown
// fields are kept (looseObject) so that they reach consumers and the change fingerprint.

/** A lenient text field: a string, null or missing (validation's fast path recognises fields by these objects). */
export const optionalString = z.string().nullish();
/** A lenient integer field: an integer, null or missing. */
export const optionalInt = z.number().int().nullish();

/** A publication status as sent upstream; unknown values are accepted (the full set is not specified). */
export const PublicationStatus = z.string().min(1).max(64);

/** Zod schema of one upstream review: the single source of truth for the Review type and its JSON Schema. */
export const ReviewSchema = z.looseObject({
  id: z.number().int().nonnegative(),
  updated_date: z.number().int().nonnegative(),
  client_publication_status: PublicationStatus,
  pwr_publication_status: PublicationStatus,
  headline: optionalString,
  rating: optionalInt,
  comments: optionalString,
  nickname: optionalString,
  email: optionalString,
  location: optionalString,
  bottom_line: optionalString,
  locale: optionalString,
  type: optionalString,
  product_page_id: optionalString,
  merchant_group_id: optionalInt,
  merchant_id: optionalInt,
  created_date: optionalInt,
  helpful_votes: optionalInt,
  not_helpful_votes: optionalInt,
  review_source: optionalString,
});

/** A validated upstream review (unknown fields preserved). */
export type Review = z.infer<typeof ReviewSchema>;

/** The non-status fields whose edits produce `review.updated`, in a fixed order (the snapshot fingerprint relies on it). */
export const TRACKED_FIELDS = [
  'headline',
  'rating',
  'comments',
  'nickname',
  'email',
  'location',
  'bottom_line',
  'locale',
  'type',
  'product_page_id',
  'merchant_group_id',
  'merchant_id',
  'created_date',
  'helpful_votes',
  'not_helpful_votes',
  'review_source',
] as const;

/** Name of a tracked non-status field. */
export type TrackedField = (typeof TRACKED_FIELDS)[number];

/** The two publication-status fields, each diffed separately. */
export const STATUS_FIELDS = ['client_publication_status', 'pwr_publication_status'] as const;

/** Name of a publication-status field. */
export type StatusField = (typeof STATUS_FIELDS)[number];
