import { hash32, hashUnit, intBetween, mulberry32, pick, type Random } from './prng.js';

// Generated review data. Base reviews are a pure function of (seed, id): nothing about them is stored until a
// test changes one. Their timestamps lie before a fixed epoch (not the start time) so that the same seed gives
// byte-identical data in every run, and any updated_date filter after that epoch only concerns changed reviews.

/** A review as the simulator serves it: a plain JSON object (edits may put anything in it). */
export type SimRecord = Record<string, unknown>;

/** Every base review was last updated before this instant (2024-01-01T00:00:00Z). */
export const BASE_EPOCH_MS = Date.UTC(2024, 0, 1);

/** The status values the simulator uses; the spec only fixes APPROVED. */
export const KNOWN_STATUSES = ['PENDING', 'APPROVED', 'REJECTED'] as const;

/** A status outside the known set, served now and then so clients meet one. */
export const UNKNOWN_STATUS = 'ON_HOLD';

const DAY_MS = 86_400_000;
const CREATED_SPAN_MS = 3 * 365 * DAY_MS;
const MAX_UPDATE_DELAY_MS = 30 * DAY_MS;

// Salts keep the independent hash streams of one record apart.
const SALT_RECORD = 1;
const SALT_CREATED = 2;
const SALT_UPDATE_DELAY = 3;

const ADJECTIVES = ['Great', 'Solid', 'Disappointing', 'Excellent', 'Decent', 'Flimsy', 'Sturdy', 'Lovely', 'Okay'];
const NOUNS = ['purchase', 'quality', 'value', 'fit', 'product', 'gift', 'buy', 'finish', 'choice'];
const SENTENCES = [
  'Arrived on time and well packed.',
  'Does exactly what the description says.',
  'The colour is slightly different from the photos.',
  'I would buy this again.',
  'Stopped working after two weeks.',
  'Customer service was helpful when I had a question.',
  'Good value for the price.',
  'Assembly took longer than expected.',
  'My kids love it.',
  'The material feels cheap.',
];
const NICKNAMES = ['Sam', 'Alex', 'Jo', 'Chris', 'Robin', 'Kim', 'Taylor', 'Jamie', 'Morgan', 'Casey'];
const LOCATIONS = ['Berlin', 'Lyon', 'Austin, TX', 'Leeds', 'Madrid', 'Utrecht', 'Turin', 'Toronto', 'Osaka'];
const LOCALES = ['en_US', 'en_GB', 'de_DE', 'fr_FR', 'es_ES', 'nl_NL', 'it_IT', 'en_CA', 'ja_JP'];
const SOURCES = ['WEB', 'MOBILE_APP', 'EMAIL_FOLLOWUP', 'SAMPLING', 'IMPORTED'];
const EMAIL_DOMAINS = ['example.com', 'example.org', 'example.net'];
const MERCHANT_GROUP_ID = 78_120;
const MERCHANT_IDS = [9040, 9041, 9042];

/** created_date and updated_date of a base review, derivable without generating the rest (for filtered scans). */
export function baseTimes(seed: number, id: number): { created: number; updated: number } {
  const created =
    BASE_EPOCH_MS -
    CREATED_SPAN_MS +
    Math.floor(hashUnit(seed, id, SALT_CREATED) * (CREATED_SPAN_MS - MAX_UPDATE_DELAY_MS));
  const updated = created + Math.floor(hashUnit(seed, id, SALT_UPDATE_DELAY) * MAX_UPDATE_DELAY_MS);
  return { created, updated };
}

/** updated_date of a base review. */
export function baseUpdatedDate(seed: number, id: number): number {
  return baseTimes(seed, id).updated;
}

/** A publication status: mostly the known values, about one in a hundred unknown. */
export function randomStatus(random: Random): string {
  const r = random();
  if (r < 0.01) return UNKNOWN_STATUS;
  if (r < 0.72) return 'APPROVED';
  if (r < 0.86) return 'PENDING';
  return 'REJECTED';
}

function rating(random: Random): number {
  const r = random();
  if (r < 0.05) return 1;
  if (r < 0.12) return 2;
  if (r < 0.25) return 3;
  if (r < 0.55) return 4;
  return 5;
}

function votes(random: Random): number {
  // Most reviews get few votes; a handful get many.
  return Math.floor(random() ** 3 * 60);
}

/** Sets key to a value, to null, or leaves it out, so clients meet all three shapes of an optional field. */
function optional(
  record: SimRecord,
  key: string,
  random: Random,
  value: unknown,
  nullShare: number,
  missingShare: number,
): void {
  const r = random();
  if (r < missingShare) return;
  record[key] = r < missingShare + nullShare ? null : value;
}

/** Fills the generated fields of a review from a generator (shared by base and created reviews). */
function fillFields(record: SimRecord, random: Random, id: number, created: number, updated: number): SimRecord {
  const nickname = `${pick(random, NICKNAMES)}${intBetween(random, 1, 999)}`;
  record.id = id;
  record.headline = `${pick(random, ADJECTIVES)} ${pick(random, NOUNS)}`;
  record.rating = rating(random);
  const sentenceCount = intBetween(random, 1, 4);
  const sentences: string[] = [];
  for (let i = 0; i < sentenceCount; i++) sentences.push(pick(random, SENTENCES));
  record.comments = sentences.join(' ');
  optional(record, 'nickname', random, nickname, 0.05, 0);
  optional(record, 'email', random, `${nickname.toLowerCase()}.${id}@${pick(random, EMAIL_DOMAINS)}`, 0.1, 0.05);
  optional(record, 'location', random, pick(random, LOCATIONS), 0.12, 0.08);
  optional(record, 'bottom_line', random, random() < 0.78 ? 'Yes' : 'No', 0.1, 0);
  record.locale = pick(random, LOCALES);
  record.type = 'Review';
  record.product_page_id = `prod-${intBetween(random, 1, 5000)}`;
  record.merchant_group_id = MERCHANT_GROUP_ID;
  record.merchant_id = pick(random, MERCHANT_IDS);
  record.created_date = created;
  record.updated_date = updated;
  record.helpful_votes = votes(random);
  record.not_helpful_votes = votes(random);
  optional(record, 'review_source', random, pick(random, SOURCES), 0.03, 0.02);
  record.client_publication_status = randomStatus(random);
  record.pwr_publication_status = randomStatus(random);
  return record;
}

/** The base review with this id: same seed and id, same record, in every run. */
export function generateBaseReview(seed: number, id: number): SimRecord {
  const { created, updated } = baseTimes(seed, id);
  return fillFields({}, mulberry32(hash32(seed, id, SALT_RECORD)), id, created, updated);
}

/** A freshly submitted review (created through the control interface): pending on both sides, created = updated = now. */
export function generateNewReview(seed: number, id: number, now: number): SimRecord {
  const record = fillFields({}, mulberry32(hash32(seed, id, SALT_RECORD)), id, now, now);
  record.helpful_votes = 0;
  record.not_helpful_votes = 0;
  record.client_publication_status = 'PENDING';
  record.pwr_publication_status = 'PENDING';
  return record;
}
