// The bridge's shared vocabulary: the kinds of pass and the publication statuses it knows by name. Every module
// derives its own narrower names from these, so a new pass type or status is added in one place.

/**
 * The kinds of pass: the initial load of an empty snapshot, an incremental poll from the watermark, the
 * reconciliation sweep, and an operator's resync of chosen reviews. An event's `data.detection`, the metric label
 * `pass` and the checkpoint use these names.
 */
export const PASS_TYPES = ['initial', 'incremental', 'sweep', 'resync'] as const;

/** One kind of pass. */
export type PassType = (typeof PASS_TYPES)[number];

/** The passes that read the whole listing page by page from a resumable (checkpointed) cursor. */
export type FullScanType = Exclude<PassType, 'incremental' | 'resync'>;

/** The passes that run page by page between incremental polls: full scans and resyncs. */
export type LongPassType = Exclude<PassType, 'incremental'>;

/** Which queue of the upstream rate limiter a request waits in: polls go before every longer pass. */
export type RequestPriority = Extract<PassType, 'incremental' | 'sweep'>;

/** The priority a pass's requests get: full scans and resyncs yield to incremental polls. */
export function requestPriority(type: PassType): RequestPriority {
  return type === 'incremental' ? 'incremental' : 'sweep';
}

/** Whether a value names a pass type (for values read back from Redis or labels). */
export function isPassType(value: unknown): value is PassType {
  return (PASS_TYPES as readonly unknown[]).includes(value);
}

/**
 * Publication statuses the spec names. Others are accepted (the full set is not specified) but get no metric
 * label of their own and take more room in the snapshot; the order is part of the snapshot's binary format.
 */
export const KNOWN_STATUSES = ['PENDING', 'APPROVED', 'REJECTED'] as const;
