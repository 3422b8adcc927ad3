import { ReviewSchema } from '../../src/core/review.js';
import { REJECT_KINDS } from '../../src/core/reject.js';

// A reject's detail is built from a closed vocabulary: `label:code` parts joined by ", ", a label being a field of
// the review schema (or a dotted path of them and array indices) or a parenthesized placeholder, a code a reject
// kind or a zod issue code. Property tests check a detail's words against it instead of searching the detail for a
// generated value: a generated string may be part of a legitimate word ("trin" of "string_too_long").

const LABELS: ReadonlySet<string> = new Set([
  ...Object.keys(ReviewSchema.shape),
  '(record)',
  '(unknown field)',
  '(event)',
]);

/** zod 4's issue codes (what a schema reject names after the path). */
const ZOD_CODES = [
  'invalid_type',
  'too_big',
  'too_small',
  'invalid_format',
  'not_multiple_of',
  'unrecognized_keys',
  'invalid_union',
  'invalid_key',
  'invalid_element',
  'invalid_value',
  'custom',
];
const CODES: ReadonlySet<string> = new Set<string>([...REJECT_KINDS, ...ZOD_CODES]);

/** The words of a reject detail that are not in the vocabulary (empty: the detail carries nothing else). */
export function wordsOutsideVocabulary(detail: string): string[] {
  const outside: string[] = [];
  for (const part of detail.split(', ')) {
    const at = part.lastIndexOf(':');
    if (at < 0) {
      outside.push(part);
      continue;
    }
    const code = part.slice(at + 1);
    if (!CODES.has(code)) outside.push(code);
    const label = part.slice(0, at);
    if (LABELS.has(label)) continue;
    for (const segment of label.split('.')) {
      if (!LABELS.has(segment) && !/^\d+$/.test(segment)) outside.push(segment);
    }
  }
  return outside;
}
