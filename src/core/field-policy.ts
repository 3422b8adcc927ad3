import { hash as oneShotHash } from 'node:crypto';
import { STATUS_FIELDS } from './review.js';
import { FieldPolicySpecError } from './errors.js';

// The personal-data policy for everything the bridge publishes: which fields of a review leave the process raw,
// hashed, masked or not at all. Pure (the hash key is handed in), applied at serialization time, after the diff:
// change detection and fingerprints always see the raw values, so a change to a hashed or dropped field is still
// detected and named in changed_fields.
//
// Safe by default: without configuration the `email` field, and any string that looks like an e-mail address
// wherever it appears, is never published raw: hashed when a key is configured, dropped (or, inside free text,
// replaced by "(email)") otherwise. Only EVENT_FIELDS_ALLOW_RAW_EMAIL=true publishes them as received.

/** What may be in a dead letter: ids and sizes only, the record under the policy, or the record as received. */
export type DeadLetterPayload = 'reference' | 'masked' | 'raw';

/** Keep the first `keep` characters and append "***"; `keep: null` replaces the whole value by "***". */
export interface MaskRule {
  path: string;
  keep: number | null;
}

/** The policy as configured (dotted paths; a path runs through arrays, applying to each element). */
export interface FieldPolicySpec {
  /** Allow-list; null publishes every field (the required ones are always kept). */
  include: string[] | null;
  exclude: string[];
  hash: string[];
  mask: MaskRule[];
  /** Explicit, logged opt-in to publish e-mail addresses as received. */
  allowRawEmail: boolean;
}

/** The default policy: nothing configured, e-mail addresses protected. */
export const DEFAULT_FIELD_POLICY_SPEC: FieldPolicySpec = {
  include: null,
  exclude: [],
  hash: [],
  mask: [],
  allowRawEmail: false,
};

/** Fields every event needs (the schema requires them and consumers key on them); no rule may touch them. */
export const PROTECTED_FIELDS: readonly string[] = ['id', 'updated_date', ...STATUS_FIELDS];

/** Prefix of a hashed value: `hmac-sha256:<64 hex digits>`. */
export const HASH_PREFIX = 'hmac-sha256:';

/** What stands in for an e-mail address inside free text when no hash key is configured. */
export const EMAIL_PLACEHOLDER = '(email)';

/** Text that looks like an e-mail address (also used to redact error messages and logs). */
export const EMAIL_PATTERN = /[^\s@"'<>(),;:]+@[^\s@"'<>(),;:]+\.[A-Za-z]{2,}/g;

const WHOLE_EMAIL = new RegExp(`^${EMAIL_PATTERN.source}$`);
const PATH = /^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$/;
const MASK = '***';

/** Re-exported from the one error model, where it is defined. */
export { FieldPolicySpecError };

function entries(text: string | undefined): string[] {
  return (text ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
}

function pathList(setting: string, text: string | undefined): string[] {
  const paths = entries(text);
  for (const p of paths) {
    if (!PATH.test(p)) throw new FieldPolicySpecError(setting, `"${p}" is not a dotted field path`);
  }
  return paths;
}

/** The policy settings as read from the environment (raw strings). */
export interface FieldPolicySettings {
  EVENT_FIELDS_INCLUDE?: string | undefined;
  EVENT_FIELDS_EXCLUDE?: string | undefined;
  EVENT_FIELDS_HASH?: string | undefined;
  EVENT_FIELDS_MASK?: string | undefined;
  EVENT_FIELDS_ALLOW_RAW_EMAIL?: boolean | undefined;
}

/**
 * Parses the settings: lists of dotted paths separated by commas; a mask entry is `path` (whole value → "***")
 * or `path:N` (first N characters kept, then "***"). A path may have one rule only, and the fields events need
 * (PROTECTED_FIELDS) none.
 */
export function parseFieldPolicySpec(settings: FieldPolicySettings): FieldPolicySpec {
  const include = pathList('EVENT_FIELDS_INCLUDE', settings.EVENT_FIELDS_INCLUDE);
  const exclude = pathList('EVENT_FIELDS_EXCLUDE', settings.EVENT_FIELDS_EXCLUDE);
  const hash = pathList('EVENT_FIELDS_HASH', settings.EVENT_FIELDS_HASH);
  const mask = entries(settings.EVENT_FIELDS_MASK).map((entry): MaskRule => {
    const m = /^([^:]+)(?::(\d{1,4}))?$/.exec(entry);
    if (!m || !PATH.test(m[1]!)) {
      throw new FieldPolicySpecError('EVENT_FIELDS_MASK', `"${entry}" must be path or path:N (N characters kept)`);
    }
    return { path: m[1]!, keep: m[2] === undefined ? null : Number(m[2]) };
  });
  const seen = new Map<string, string>();
  for (const [setting, paths] of [
    ['EVENT_FIELDS_EXCLUDE', exclude],
    ['EVENT_FIELDS_HASH', hash],
    ['EVENT_FIELDS_MASK', mask.map((m) => m.path)],
  ] as const) {
    for (const p of paths) {
      if (PROTECTED_FIELDS.includes(p)) throw new FieldPolicySpecError(setting, `${p} is required in every event`);
      const other = seen.get(p);
      if (other) throw new FieldPolicySpecError(setting, `${p} already has a rule in ${other}`);
      seen.set(p, setting);
    }
  }
  return {
    include: include.length > 0 ? include : null,
    exclude,
    hash,
    mask,
    allowRawEmail: settings.EVENT_FIELDS_ALLOW_RAW_EMAIL ?? false,
  };
}

type Action = { kind: 'exclude' } | { kind: 'hash' } | { kind: 'mask'; keep: number | null };

interface RuleNode {
  action?: Action;
  children: Map<string, RuleNode>;
}

interface IncludeNode {
  /** The whole subtree is included. */
  all: boolean;
  children: Map<string, IncludeNode>;
}

function ruleTree(spec: FieldPolicySpec): RuleNode {
  const root: RuleNode = { children: new Map() };
  const put = (path: string, action: Action) => {
    let node = root;
    for (const seg of path.split('.')) {
      let next = node.children.get(seg);
      if (!next) node.children.set(seg, (next = { children: new Map() }));
      node = next;
    }
    node.action = action;
  };
  for (const p of spec.exclude) put(p, { kind: 'exclude' });
  for (const p of spec.hash) put(p, { kind: 'hash' });
  for (const m of spec.mask) put(m.path, { kind: 'mask', keep: m.keep });
  return root;
}

function includeTree(paths: readonly string[]): IncludeNode {
  const root: IncludeNode = { all: false, children: new Map() };
  for (const path of [...paths, ...PROTECTED_FIELDS]) {
    let node = root;
    for (const seg of path.split('.')) {
      let next = node.children.get(seg);
      if (!next) node.children.set(seg, (next = { all: false, children: new Map() }));
      node = next;
    }
    node.all = true;
  }
  return root;
}

/** Applies a configured policy; built once per process. */
export interface FieldPolicy {
  /** The review (or any record that parsed as an object) as it may be published. Never mutates its input. */
  applyToRecord(record: Readonly<Record<string, unknown>>): Record<string, unknown>;
  /** Any value (a dead letter's record may be anything): objects get applyToRecord, strings the e-mail guard. */
  applyToValue(value: unknown): unknown;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

// A string "looks like" an e-mail address also when its JSON form does (a control character before the "@" is
// serialized as \uXXXX, whose letters then read as the address's local part).
function containsEmail(text: string): boolean {
  return text.includes('@') && (test(text) || test(JSON.stringify(text)));
}

function test(text: string): boolean {
  EMAIL_PATTERN.lastIndex = 0;
  const found = EMAIL_PATTERN.test(text);
  EMAIL_PATTERN.lastIndex = 0;
  return found;
}

/**
 * Builds the policy. `hashKey` keys the HMAC (null: hashing is not possible, so hash rules must not exist and
 * e-mail addresses are dropped instead of hashed).
 */
export function createFieldPolicy(spec: FieldPolicySpec, hashKey: Buffer | null): FieldPolicy {
  if (spec.hash.length > 0 && hashKey === null) throw new Error('EVENT_FIELDS_HASH needs a hash key');
  const rules = ruleTree(spec);
  const include = spec.include ? includeTree(spec.include) : null;
  const guard = !spec.allowRawEmail;

  const hmac = hashKey ? hmacSha256(hashKey) : null;
  const hash = (value: unknown): string =>
    HASH_PREFIX + hmac!(typeof value === 'string' ? value : JSON.stringify(value));

  // Replaces every e-mail address inside a text. A replacement can expose a new match (a token followed by
  // "@x.y"), but each round removes an "@", so the loop ends; a text whose JSON form still matches is replaced.
  const scrub = (text: string): string => {
    if (!guard || !containsEmail(text)) return text;
    let out = text;
    for (let round = 0; round < 64 && test(out); round++) {
      out = out.replace(EMAIL_PATTERN, (m) => (hashKey ? hash(m) : EMAIL_PLACEHOLDER));
    }
    return containsEmail(out) ? (hashKey ? hash(text) : EMAIL_PLACEHOLDER) : out;
  };

  const mask = (value: unknown, keep: number | null): unknown => {
    if (value === null || value === undefined) return value;
    if (keep === null || typeof value !== 'string') return MASK;
    return scrub([...value].slice(0, keep).join('') + MASK);
  };

  // Values without a rule: strings are scrubbed, containers walked (the rule and include trees follow the keys).
  const walk = (value: unknown, node: RuleNode | undefined, inc: IncludeNode | null): unknown => {
    if (typeof value === 'string') return scrub(value);
    if (Array.isArray(value)) return value.map((v) => walk(v, node, inc));
    if (isObject(value)) return walkObject(value, node, inc);
    return value;
  };

  // Runs for every published review: keys rather than entries (no pair per field), and no rule lookup where the
  // node has no rules.
  const walkObject = (
    record: Readonly<Record<string, unknown>>,
    node: RuleNode | undefined,
    inc: IncludeNode | null,
  ): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    const ruled = node !== undefined && node.children.size > 0 ? node.children : null;
    for (const key of Object.keys(record)) {
      const value = record[key];
      if (guard && containsEmail(key)) continue;
      let childInc: IncludeNode | null = null;
      if (inc && !inc.all) {
        const n = inc.children.get(key);
        if (!n) continue;
        childInc = n.all ? null : n;
      }
      const child = ruled?.get(key);
      const action = child?.action;
      if (action?.kind === 'exclude') continue;
      if (action?.kind === 'hash') {
        out[key] = value === null || value === undefined ? value : hash(value);
        continue;
      }
      if (action?.kind === 'mask') {
        out[key] = mask(value, action.keep);
        continue;
      }
      // The safe default: an `email` field, or a value that is an e-mail address, is hashed or dropped.
      if (
        guard &&
        !action &&
        (key === 'email' || (typeof value === 'string' && value.includes('@') && WHOLE_EMAIL.test(value.trim())))
      ) {
        if (value === null || value === undefined) out[key] = value;
        else if (hashKey) out[key] = hash(value);
        continue;
      }
      out[key] = walk(value, child, childInc);
    }
    return out;
  };

  return {
    applyToRecord: (record) => walkObject(record, rules, include),
    applyToValue: (value) => (isObject(value) ? walkObject(value, rules, include) : walk(value, undefined, null)),
  };
}

/** HMAC block size of SHA-256 (RFC 2104's B). */
const HMAC_BLOCK = 64;

/**
 * HMAC-SHA256 (RFC 2104, hex) under a fixed key, from two one-shot hashes over precomputed key pads: the same
 * output as createHmac, which costs about seven times more per call (a new keyed object each time), and the
 * default policy hashes every published e-mail address when a key is configured.
 */
export function hmacSha256(key: Buffer): (text: string) => string {
  const k = key.length > HMAC_BLOCK ? oneShotHash('sha256', key, 'buffer') : key;
  const inner = Buffer.alloc(HMAC_BLOCK, 0x36);
  const outer = Buffer.alloc(HMAC_BLOCK + 32, 0);
  outer.fill(0x5c, 0, HMAC_BLOCK);
  for (let i = 0; i < k.length; i++) {
    inner[i] = inner[i]! ^ k[i]!;
    outer[i] = outer[i]! ^ k[i]!;
  }
  return (text) => {
    const message = Buffer.from(text, 'utf8');
    const innerDigest = oneShotHash('sha256', Buffer.concat([inner, message], HMAC_BLOCK + message.length), 'buffer');
    innerDigest.copy(outer, HMAC_BLOCK);
    return oneShotHash('sha256', outer, 'hex');
  };
}

/** An event as it may be published: the policy applied to `data.review`, everything else unchanged. */
export function protectEvent<E extends { data: { review: Readonly<Record<string, unknown>> } }>(
  event: E,
  policy: FieldPolicy,
): E {
  const review = policy.applyToRecord(event.data.review) as E['data']['review'];
  return { ...event, data: { ...event.data, review } };
}

/** What a dead letter carries of its record: nothing but its size, the record under the policy, or all of it. */
export function deadLetterRecord(
  raw: unknown,
  policy: FieldPolicy,
  payload: DeadLetterPayload,
): { record: unknown } | { record_bytes: number } {
  if (payload === 'raw') return { record: raw };
  if (payload === 'masked') return { record: policy.applyToValue(raw) };
  return { record_bytes: Buffer.byteLength(JSON.stringify(raw) ?? '') };
}
