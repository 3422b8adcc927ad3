import { CLOUDEVENTS_CONTENT_TYPE, type ReviewEvent } from './events.js';
import { jsonChunks } from './record-digest.js';
import type { Reject } from './reject.js';

// What the bridge hands to Kafka, and whether it fits. The broker refuses a record batch larger than its
// max.message.bytes, and a refused send fails the page; so every message is measured the way the publisher
// serializes it (one function for both, they cannot disagree) before it is sent. An event over the limit has its
// largest free-text fields of data.review cut to fit, named in data.truncated_fields; if that is not enough the
// review becomes a `too_large` dead letter carrying a reference (id, sizes), never the record. Pure functions only.

/** One Kafka message as the publisher sends it. */
export interface OutgoingMessage {
  key: string | null;
  value: string;
  headers: Record<string, string>;
}

/**
 * Bytes a message may add beside key, value and headers: the v2 record batch header (61 bytes) for a batch of one,
 * plus the record's own varints (length, attributes, timestamp and offset deltas, key/value/header lengths).
 */
const MESSAGE_OVERHEAD_BYTES = 128;
/** Per header: two length varints. */
const HEADER_OVERHEAD_BYTES = 16;

/** Fields of data.review that are not free text (identity, statuses, codes): never cut. */
const NOT_FREE_TEXT: ReadonlySet<string> = new Set([
  'client_publication_status',
  'pwr_publication_status',
  'email',
  'locale',
  'type',
  'product_page_id',
  'review_source',
]);

/** Bytes of an event message beside its key and value: the overhead and the content-type header. */
const EVENT_HEADER_BYTES =
  MESSAGE_OVERHEAD_BYTES +
  HEADER_OVERHEAD_BYTES +
  Buffer.byteLength('content-type') +
  Buffer.byteLength(CLOUDEVENTS_CONTENT_TYPE);

/**
 * The message of a CloudEvent (change, deletion, heartbeat): key = its subject, value = structured-mode JSON. An
 * event's traceparent goes in a `traceparent` header too (the distributed-tracing extension's Kafka binding), so
 * that a consumer can read it without parsing the value.
 */
export function eventMessage(event: { subject: string; traceparent?: string }): OutgoingMessage {
  const headers: Record<string, string> = { 'content-type': CLOUDEVENTS_CONTENT_TYPE };
  if (event.traceparent !== undefined) headers.traceparent = event.traceparent;
  return { key: event.subject, value: JSON.stringify(event), headers };
}

/**
 * Bytes a traceparent adds to an event's message (the attribute in the value and the header): reserved by fitEvent
 * whether tracing is on or not, so that the cut of an event never depends on it and a stamped event still fits.
 */
export const TRACE_CONTEXT_BYTES = (() => {
  const traceparent = `00-${'0'.repeat(32)}-${'0'.repeat(16)}-01`;
  return messageBytes(eventMessage({ subject: '', traceparent })) - messageBytes(eventMessage({ subject: '' }));
})();

/** The bytes an event's message takes once sent: as built, plus its trace context when it has none yet. */
function sentBytes(event: ReviewEvent): number {
  const bytes = messageBytes(eventMessage(event));
  return event.traceparent === undefined ? bytes + TRACE_CONTEXT_BYTES : bytes;
}

/** Upper bound of the bytes a message occupies in a record batch on the broker (UTF-8, overheads included). */
export function messageBytes(message: Omit<OutgoingMessage, 'value'> & { value: string | Buffer }): number {
  let bytes = MESSAGE_OVERHEAD_BYTES + Buffer.byteLength(message.value);
  if (message.key !== null) bytes += Buffer.byteLength(message.key);
  // for...in, not Object.entries: no pair per header (this runs for every message of every commit).
  for (const name in message.headers) {
    bytes += HEADER_OVERHEAD_BYTES + Buffer.byteLength(name) + Buffer.byteLength(message.headers[name]!);
  }
  return bytes;
}

/** A reference to an event that cannot be sent: enough to find the review, nothing of its content. */
export interface TooLargeReference {
  review_id: number;
  event_type: ReviewEvent['type'];
  /** Bytes of the event's message as built. */
  original_bytes: number;
  /** The limit it was measured against. */
  limit_bytes: number;
}

/** What fitEvent decided for one event. */
export type EventFit =
  | { verdict: 'fits'; event: ReviewEvent }
  | { verdict: 'truncated'; event: ReviewEvent; truncatedFields: string[]; originalBytes: number }
  | { verdict: 'too_large'; reference: TooLargeReference };

/**
 * Returns the event unchanged when its message fits `limitBytes`; else a copy whose largest free-text fields of
 * data.review are cut (longest first) until it fits, listed in data.truncated_fields; else a too_large verdict.
 * Deterministic: a re-published event is cut the same way, so it stays identical to its first delivery.
 */
export function fitEvent(event: ReviewEvent, limitBytes: number): EventFit {
  // Almost every event is far below the limit: a bound from the value lengths settles it without serializing
  // (the key is the subject, at most 3 UTF-8 bytes per UTF-16 unit; the headers are the content type and the
  // traceparent reserve, which an event already stamped counts twice: a bound may be loose, never short).
  const fixed = EVENT_HEADER_BYTES + TRACE_CONTEXT_BYTES + 3 * event.subject.length;
  if (fixed + jsonBytesBound(event, limitBytes - fixed) <= limitBytes) {
    return { verdict: 'fits', event };
  }
  const originalBytes = messageBytes(eventMessage(event));
  if (sentBytes(event) <= limitBytes) return { verdict: 'fits', event };
  const review: Record<string, unknown> = { ...event.data.review };
  const truncated = new Set<string>();
  const candidates = Object.keys(review).filter((k) => typeof review[k] === 'string' && !NOT_FREE_TEXT.has(k));
  const build = (): ReviewEvent =>
    ({
      ...event,
      data: { ...event.data, review, truncated_fields: candidates.filter((k) => truncated.has(k)) },
    }) as ReviewEvent;
  // Each round cuts the longest remaining text by what is still in excess (proportionally to its JSON size, then
  // re-measured exactly); a field emptied leaves the race. Bounded: every round shortens or empties a field.
  for (let round = 0; round < 4 * candidates.length + 4; round++) {
    const candidate = build();
    const bytes = sentBytes(candidate);
    if (bytes <= limitBytes) {
      return {
        verdict: 'truncated',
        event: candidate,
        truncatedFields: [...candidate.data.truncated_fields!],
        originalBytes,
      };
    }
    const field = longestText(review, candidates);
    if (field === null) break;
    const text = review[field] as string;
    const textBytes = Buffer.byteLength(JSON.stringify(text)) - 2;
    const excess = bytes - limitBytes;
    // Keep a share of characters proportional to the bytes that may stay, a little under to converge quickly.
    const keep = textBytes <= excess ? 0 : Math.floor((text.length * (textBytes - excess)) / textBytes) - 1;
    review[field] = cutAt(text, Math.max(0, Math.min(keep, text.length - 1)));
    truncated.add(field);
  }
  return {
    verdict: 'too_large',
    reference: {
      review_id: event.data.review.id,
      event_type: event.type,
      original_bytes: originalBytes,
      limit_bytes: limitBytes,
    },
  };
}

// Bytes of JSON text a value may take at most: a string's UTF-16 code unit at most 6 (\uXXXX), a number 24
// (-1.2345678901234567e-308), a key its text plus quotes and colon, a member its comma. Walked iteratively (any
// depth); stops as soon as the bound passes `stopAbove` (the caller then measures exactly).
/** At most how many bytes of JSON one UTF-16 code unit of a string takes (\uXXXX). */
export const MAX_BYTES_PER_CODE_UNIT = 6;
/** At most how many bytes of JSON a number takes (-1.2345678901234567e-308). */
export const MAX_NUMBER_BYTES = 24;

/** An upper bound of the UTF-8 bytes of JSON.stringify(value) (headers of the message not included). */
export function jsonBytesBound(value: unknown, stopAbove = Infinity): number {
  const stack: unknown[] = [value];
  let bytes = 0;
  while (stack.length > 0 && bytes <= stopAbove) {
    const v = stack.pop();
    switch (typeof v) {
      case 'string':
        bytes += 2 + v.length * MAX_BYTES_PER_CODE_UNIT;
        continue;
      case 'number':
        bytes += MAX_NUMBER_BYTES;
        continue;
      case 'boolean':
        bytes += 5;
        continue;
      case 'object':
        break;
      default:
        // undefined, functions, symbols: dropped or null; a bigint would make JSON.stringify throw: measured exactly.
        if (typeof v === 'bigint') return Infinity;
        bytes += 4;
        continue;
    }
    if (v === null) {
      bytes += 4;
      continue;
    }
    if (typeof (v as { toJSON?: unknown }).toJSON === 'function') return Infinity;
    bytes += 2;
    if (Array.isArray(v)) {
      bytes += v.length;
      for (const item of v) stack.push(item);
      continue;
    }
    // for...in allocates no key array; an inherited enumerable key would only make the bound looser, never short.
    // Strings and numbers (most members) are counted here, not pushed: the stack stays short.
    for (const key in v) {
      bytes += 4 + key.length * MAX_BYTES_PER_CODE_UNIT;
      const member = (v as Record<string, unknown>)[key];
      if (typeof member === 'string') bytes += 2 + member.length * MAX_BYTES_PER_CODE_UNIT;
      else if (typeof member === 'number') bytes += MAX_NUMBER_BYTES;
      else stack.push(member);
    }
  }
  return bytes;
}

/** What fitReviewEvents decided for the events of one review. */
export type ReviewEventsFit =
  { verdict: 'publish'; events: ReviewEvent[]; truncated: ReviewEvent[] } | { verdict: 'too_large'; reject: Reject };

/**
 * Fits the events of one review change (status_changed then updated, or created) as a unit: all are published
 * (some perhaps cut), or, when one cannot be made to fit, none is and the review becomes one `too_large` dead letter.
 * Publishing only some would leave a gap in the review's sequence numbers.
 */
export function fitReviewEvents(events: readonly ReviewEvent[], limitBytes: number): ReviewEventsFit {
  const out: ReviewEvent[] = [];
  const truncated: ReviewEvent[] = [];
  for (const event of events) {
    const fit = fitEvent(event, limitBytes);
    if (fit.verdict === 'too_large') return { verdict: 'too_large', reject: tooLargeReject(fit.reference) };
    out.push(fit.event);
    if (fit.verdict === 'truncated') truncated.push(fit.event);
  }
  return { verdict: 'publish', events: out, truncated };
}

/** The dead letter of an event that does not fit even cut: a reference in place of the record. */
export function tooLargeReject(reference: TooLargeReference): Reject {
  return { id: String(reference.review_id), reason: 'too_large', detail: '(event):too_large', raw: reference };
}

function longestText(review: Record<string, unknown>, candidates: readonly string[]): string | null {
  let best: string | null = null;
  let bestLength = 0;
  for (const key of candidates) {
    const value = review[key];
    if (typeof value === 'string' && value.length > bestLength) {
      best = key;
      bestLength = value.length;
    }
  }
  return best;
}

/** The first `length` UTF-16 units of a text, one fewer when the cut would split a surrogate pair. */
function cutAt(text: string, length: number): string {
  if (length > 0 && length < text.length) {
    const code = text.charCodeAt(length - 1);
    if (code >= 0xd800 && code <= 0xdbff) return text.slice(0, length - 1);
  }
  return text.slice(0, length);
}

/** A record on its way to the dead-letter topic (see DeadLetter in publisher.ts). */
export interface DeadLetterInput {
  reject: Reject;
  pass: string;
  detectedAt: number;
  /**
   * Keyed digest of the record (hex), the message key (`record:<digest>`) when it has no readable id: a keyless
   * message goes round-robin, this one always to the same partition, and the digest confirms nothing without the key.
   */
  recordKey?: string | null;
}

/** Reject kinds whose raw record is never forwarded: its shape itself is the hazard for consumers. */
const RECORD_WITHHELD: ReadonlySet<Reject['reason']> = new Set(['too_deep']);

/** The message key of a dead letter: the review id, or else `record:` and the record's keyed digest, or else none. */
function deadLetterKey(dl: DeadLetterInput): string | null {
  return dl.reject.id ?? (dl.recordKey ? `record:${dl.recordKey}` : null);
}

/**
 * The message of a dead letter: `{account, reason, detail, pass, detected_at, record}` keyed by the review id, with
 * the kind and detail as headers. When the record would not fit `limitBytes` (or is withheld by kind), `record`
 * is null and `record_omitted` says why and how large it was: the dead letter itself must never fail a page.
 */
export function deadLetterMessage(dl: DeadLetterInput, account: string, limitBytes: number): OutgoingMessage {
  const headers = {
    'content-type': 'application/json',
    'dlq-reason': dl.reject.reason,
    'dlq-detail': dl.reject.detail,
  };
  const envelope = {
    account,
    reason: dl.reject.reason,
    detail: dl.reject.detail,
    pass: dl.pass,
    detected_at: new Date(dl.detectedAt).toISOString(),
  };
  const head = JSON.stringify(envelope).slice(0, -1);
  const withheld = RECORD_WITHHELD.has(dl.reject.reason);
  if (!withheld) {
    // The raw record may be nested deeper than JSON.stringify survives: serialized iteratively, and only as far
    // as the limit allows.
    let record = '';
    for (const chunk of jsonChunks(dl.reject.raw === undefined ? null : dl.reject.raw)) {
      record += chunk;
      if (record.length > limitBytes) break;
    }
    const message = { key: deadLetterKey(dl), value: `${head},"record":${record}}`, headers };
    if (record.length <= limitBytes && messageBytes(message) <= limitBytes) return message;
  }
  const omitted = { reason: withheld ? dl.reject.reason : 'too_large', limit_bytes: limitBytes };
  return {
    key: deadLetterKey(dl),
    value: `${head},"record":null,"record_omitted":${JSON.stringify(omitted)}}`,
    headers,
  };
}
