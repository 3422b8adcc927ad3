import type { ReadMessage } from './kafka.js';

// What a reader of a topic holds, as bytes, and whether a secret is among them in any usual encoding: the tests
// that promise no secret reaches Kafka search every record's key, value and headers with these.

/** One place a byte sequence was found: the topic, the record's offset and which part of it. */
export interface Finding {
  secret: string;
  form: string;
  topic: string;
  partition: number;
  offset: string;
  part: string;
}

/**
 * The forms a secret can take in a record: its bytes, hex (both cases), and base64 and base64url at each of the
 * three byte alignments (the characters that depend on the secret's bytes alone), so a secret embedded in a
 * longer encoded value is found too.
 */
export function secretForms(secret: Buffer): Array<{ form: string; bytes: Buffer }> {
  const forms = [
    { form: 'raw', text: null as string | null },
    { form: 'hex', text: secret.toString('hex') },
    { form: 'HEX', text: secret.toString('hex').toUpperCase() },
  ];
  for (let shift = 0; shift < 3; shift++) {
    const std = Buffer.concat([Buffer.alloc(shift), secret]).toString('base64');
    // The first character with no bit of the padding bytes, and the last with no bit past the secret.
    const start = [0, 2, 3][shift]!;
    const end = Math.floor(((shift + secret.length) * 8) / 6);
    const inner = std.slice(start, end);
    forms.push({ form: `base64+${shift}`, text: inner });
    forms.push({ form: `base64url+${shift}`, text: inner.replace(/\+/g, '-').replace(/\//g, '_') });
  }
  return forms.map(({ form, text }) => ({ form, bytes: text === null ? secret : Buffer.from(text, 'latin1') }));
}

/** Every place one of `secrets` (name → bytes) appears in `records`, in any of its secretForms. */
export function findSecrets(records: readonly ReadMessage[], secrets: Record<string, Buffer>): Finding[] {
  const needles = Object.entries(secrets).flatMap(([secret, bytes]) =>
    secretForms(bytes).map((f) => ({ secret, ...f })),
  );
  const found: Finding[] = [];
  for (const r of records) {
    const parts: Array<[string, Buffer]> = [
      ['key', Buffer.from(r.key ?? '', 'utf8')],
      ['value', r.bytes ?? Buffer.alloc(0)],
      ...Object.entries(r.headers).flatMap(([name, value]): Array<[string, Buffer]> => [
        [`header name ${name}`, Buffer.from(name, 'utf8')],
        ...[value].flat().map((v): [string, Buffer] => [`header ${name}`, Buffer.from(v, 'utf8')]),
      ]),
    ];
    for (const [part, bytes] of parts) {
      for (const n of needles) {
        if (bytes.includes(n.bytes)) {
          found.push({
            secret: n.secret,
            form: n.form,
            topic: r.topic,
            partition: r.partition,
            offset: r.offset,
            part,
          });
        }
      }
    }
  }
  return found;
}

/**
 * Every byte string a topic reader could try as a key: each key, header value and value of the records, and each
 * string inside a JSON value, taken as text and, where it parses so, as base64 and hex; only those of 16 bytes or
 * more (no key is shorter).
 */
export function candidateKeys(records: readonly ReadMessage[]): Buffer[] {
  const texts = new Set<string>();
  const addJson = (value: unknown): void => {
    if (typeof value === 'string') texts.add(value);
    else if (Array.isArray(value)) value.forEach(addJson);
    else if (value !== null && typeof value === 'object') Object.values(value).forEach(addJson);
  };
  for (const r of records) {
    if (r.key) texts.add(r.key);
    for (const value of Object.values(r.headers).flat()) texts.add(value);
    texts.add(r.value);
    try {
      addJson(JSON.parse(r.value));
    } catch {
      // Not JSON (a binary snapshot entry): its text form is a candidate already.
    }
  }
  const keys = new Map<string, Buffer>();
  const add = (b: Buffer): void => {
    if (b.length >= 16) keys.set(b.toString('hex'), b);
  };
  for (const text of texts) {
    add(Buffer.from(text, 'utf8'));
    if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) add(Buffer.from(text, 'base64'));
    if (/^([0-9a-fA-F]{2})+$/.test(text)) add(Buffer.from(text, 'hex'));
  }
  return [...keys.values()];
}
