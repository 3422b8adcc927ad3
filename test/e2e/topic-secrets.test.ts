import { readFileSync } from 'node:fs';
import { pino } from 'pino';
import { SAFE_LOG_OPTIONS } from '../../src/ops/logger.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { FingerprintKey } from '../../src/core/fingerprint-key.js';
import { eventId, type ReviewEvent } from '../../src/core/events.js';
import { contentDigest, entryStateDigest, fingerprintSource } from '../../src/core/snapshot-entry.js';
import { keyedRecordDigest } from '../../src/core/record-digest.js';
import { ReviewSchema } from '../../src/core/review.js';
import { initialLoadDone, startTestBridge, sweepNow, testEnv, type TestBridge } from '../helpers/bridge.js';
import { readAll, type ReadMessage } from '../helpers/kafka.js';
import { testKeyFile } from '../helpers/keys.js';
import { candidateKeys, findSecrets } from '../helpers/secret-scan.js';
import { newRedis, uniqueName } from '../helpers/services.js';
import { pollUntil } from '../helpers/wait.js';

// No topic the bridge writes holds a secret, and nothing in them lets a reader confirm a guessed e-mail address
// (docs/security.md, "Who reads what"). One bridge with the test helpers' settings (a generated fingerprint key,
// its changelog copy wrapped with FINGERPRINT_KEK_FILE) and an event hash key writes every topic: the initial load,
// a status change, an edit (a sweep), a deletion, a record without a readable id (a dead letter keyed by its keyed
// digest) and heartbeats. Before the copy was wrapped, the changelog held the fingerprint key in plain base64, so
// anyone reading it could recompute event ids and dead-letter keys for a guessed address.

const UPSTREAM_SECRET = 'demo-secret';
const IDLESS = 13;

let sim: Simulator;
let b: TestBridge;
let prefix: string;
let records: ReadMessage[];
/** The bridge's log lines (debug and up, through the production logger's options). */
const logLines: string[] = [];

/** The review the guesses are about: one with an e-mail address. */
let target: { id: number; email: string };

beforeAll(async () => {
  sim = await startSimulator({ reviewCount: 60, seed: 47, rateLimit: null });
  sim.control.setFaults({ idless: [IDLESS] });
  const withEmail = [...Array(60).keys()]
    .map((i) => sim.control.get(i + 1))
    .find((r) => r !== null && typeof r.email === 'string' && r.id !== IDLESS);
  if (!withEmail) throw new Error('seed 47 gives no review with an e-mail address: pick another seed');
  target = { id: withEmail.id as number, email: withEmail.email as string };

  prefix = uniqueName('sec');
  b = await startTestBridge(
    testEnv(sim.url, {
      UPSTREAM_CLIENT_SECRET: UPSTREAM_SECRET,
      REDIS_KEY_PREFIX: prefix,
      EVENT_HASH_KEY_FILE: testKeyFile('event-hash-key'),
      HEARTBEAT_INTERVAL_MS: '1000',
      DELETE_MAX_FRACTION: '0.5',
    }),
    {},
    pino({ level: 'debug', ...SAFE_LOG_OPTIONS }, { write: (line: string) => void logLines.push(line) }),
  );
  await initialLoadDone(b);
  sim.control.setStatus(5, { client: 'REJECTED' });
  sim.control.edit(7, { headline: 'edited for the secrets test' });
  sim.control.removeReview(9);
  await sweepNow(b);
  const t = b.topics;
  const all = [t.created, t.statusChanged, t.updated, t.deadLetter, t.state, t.deleted, t.heartbeat, t.changelog];
  records = await pollUntil(
    async () => {
      const read = await readAll(all, { timeoutMs: 30_000 });
      // Every topic written at least once before the scan counts.
      return all.every((topic) => read.some((r) => r.topic === topic)) ? read : undefined;
    },
    { timeoutMs: 60_000, what: 'a record in every topic' },
  );
}, 180_000);

afterAll(async () => {
  await b?.stop();
  await sim?.close();
});

/** The generated fingerprint key, as Redis holds it (what the bridge's Redis readers have, and topic readers lack). */
async function generatedKey(): Promise<Buffer> {
  const secret = await newRedis().get(`${prefix}:fingerprint-key`);
  expect(secret).not.toBeNull();
  return Buffer.from(secret!, 'base64');
}

describe('what a reader of the topics holds', () => {
  it('no byte sequence of a secret, plain, base64 (std or url-safe) or hex, in any key, value or header', async () => {
    const secrets = {
      'fingerprint key': await generatedKey(),
      // As the files hold them and as the bridge uses them (the text's bytes).
      'fingerprint key-encryption key': Buffer.from(readFileSync(testKeyFile('fingerprint-kek'), 'utf8').trim()),
      'event hash key': Buffer.from(readFileSync(testKeyFile('event-hash-key'), 'utf8').trim()),
      'upstream client secret': Buffer.from(UPSTREAM_SECRET),
    };
    expect(records.length).toBeGreaterThan(60);
    expect(findSecrets(records, secrets)).toEqual([]);
    // Nor in the bridge's log, which says at start that the key is generated, naming the setting that chose it.
    const log = logLines.map((line, i) => ({
      topic: 'log',
      partition: 0,
      offset: String(i),
      key: null,
      value: line,
      bytes: Buffer.from(line),
      headers: {},
      timestamp: 0,
    }));
    expect(findSecrets(log, secrets)).toEqual([]);
    const warnings = logLines
      .map((l) => JSON.parse(l) as { level: number; setting?: string })
      .filter((l) => l.level === 40);
    expect(warnings.map((l) => l.setting)).toContain('FINGERPRINT_KEK_FILE');
    // The scan finds what is there (the events' source, in every event): an empty answer above means something.
    expect(findSecrets(records, { control: Buffer.from(b.config.eventSource) }).length).toBeGreaterThan(60);
  });

  it('a guessed e-mail address cannot be confirmed from event ids or dead-letter keys without the key', async () => {
    const key = new FingerprintKey(await generatedKey());
    const created = records
      .filter((r) => r.topic === b.topics.created)
      .map((r) => JSON.parse(r.value) as ReviewEvent)
      .find((e) => e.subject === String(target.id));
    expect(created).toBeDefined();
    // What a reader rebuilds: the published review with the guessed address where the policy took it away.
    const idFor = (k: FingerprintKey, email: string): string => {
      const review = ReviewSchema.parse({ ...created!.data.review, email });
      const digest = contentDigest(fingerprintSource(review, k), k);
      const state = entryStateDigest({
        updatedDate: review.updated_date,
        client: review.client_publication_status,
        pwr: review.pwr_publication_status,
        digest,
      });
      return eventId(created!.source, review.id, created!.sequence, `review.created:${state}`);
    };
    // With the key, the right guess is confirmed and a wrong one is not: the attack is real.
    expect(idFor(key, target.email)).toBe(created!.id);
    expect(idFor(key, `x${target.email}`)).not.toBe(created!.id);

    // The dead letter of the record without a readable id is keyed by its keyed digest: confirmable with the key.
    const raw = { ...sim.control.get(IDLESS)! };
    delete raw.id;
    const deadLetterKeys = records.filter((r) => r.topic === b.topics.deadLetter).map((r) => r.key);
    expect(deadLetterKeys).toContain(`record:${keyedRecordDigest(raw, key)}`);

    // Without it: every byte string of every topic, tried as the key, confirms neither.
    const candidates = candidateKeys(records);
    expect(candidates.length).toBeGreaterThan(100);
    const confirming = candidates.filter((c) => {
      const k = new FingerprintKey(c);
      return idFor(k, target.email) === created!.id || deadLetterKeys.includes(`record:${keyedRecordDigest(raw, k)}`);
    });
    expect(confirming.map((c) => c.toString('base64'))).toEqual([]);
  });
});
