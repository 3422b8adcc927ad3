import { createRequire } from 'node:module';
import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { diffPage, type DiffInput } from '../src/bridge/pipeline/page-diff.js';
import { EMPTY_CHANGELOG_CHECKPOINT } from '../src/core/changelog.js';
import { FingerprintKey } from '../src/core/fingerprint-key.js';
import { encodeEntry, type SnapshotEntry } from '../src/core/snapshot-entry.js';
import { DEFAULT_PRIVACY } from '../src/config/privacy.js';
import { byTopic, RecordEncoder } from '../src/kafka/encoding.js';
import type { BridgeConfig } from '../src/config/config.js';
import { generateBaseReview } from '../src/simulator/data.js';
import { listingRecords, validateRecords } from '../src/upstream/validate.js';
import { machine, percentile, round, speedProbe, writeResult } from './lib.js';

// The page path's pure stages, without Kafka, Redis or HTTP, in microseconds per review: parsing and validating a
// page, diffing it (every review new, then every review unchanged), building its Kafka records (events, state rows,
// changelog entries), kafkajs encoding them into record batches, and encoding the entries for Redis. Each figure is
// the median of BENCH_PAGE_PATH_REPEAT (default 30) repeats over BENCH_PAGE_PATH_PAGES (default 20) pages of 100,
// each scaled to the fastest speed the probe saw (see speedProbe in lib.ts): on a shared virtual machine whose speed
// changes by a factor of two from one moment to the next, the scaled figure is the one that compares from one change
// to the next (bench:cpu measures the whole process, with Kafka and Redis).
// BENCH_PAGE_PATH_LABEL names the result file (bench/results/page-path-<label>.json).

const require = createRequire(import.meta.url);
type RecordBatchFn = (options: Record<string, unknown>) => Promise<{ buffer: Buffer }>;
const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0') as { RecordBatch: RecordBatchFn };
// As the produce request encodes an uncompressed batch (patches/kafkajs+2.2.4.patch): each record planned, then
// written straight into the batch.
const Record = require('kafkajs/src/protocol/recordBatch/record/v0') as { plan: (record: unknown) => unknown };

const PAGES = Number(process.env.BENCH_PAGE_PATH_PAGES ?? 20);
const REPEAT = Number(process.env.BENCH_PAGE_PATH_REPEAT ?? 30);
const LABEL = process.env.BENCH_PAGE_PATH_LABEL ?? '';
const PAGE_SIZE = 100;
const logger = pino({ level: 'silent' });
const key = new FingerprintKey(randomBytes(32));

const bodies: string[] = [];
for (let p = 0; p < PAGES; p++) {
  const reviews = [];
  for (let i = 1; i <= PAGE_SIZE; i++) reviews.push(generateBaseReview(1, p * PAGE_SIZE + i));
  bodies.push(JSON.stringify({ count: reviews.length, reviews }));
}
const parse = (body: string) => {
  const { reviews, rejects } = validateRecords(listingRecords(JSON.parse(body)));
  return { cursor: null, nextCursor: null, reviews, rejects, fetchedAt: 1_700_000_000_000 };
};
const pages = bodies.map(parse);
const input = (known: ReadonlyMap<number, SnapshotEntry>): DiffInput => ({
  type: 'initial',
  initialCreates: true,
  deps: { eventSource: 'urn:reviews-bridge:bench', initialLoadMode: 'mark', logger },
  key,
  maxMessageBytes: 1_048_576,
  known,
  overlay: null,
  quarantined: { get: () => undefined },
});
const none = new Map<number, SnapshotEntry>();
const diffedNew = pages.map((page) => diffPage(page, input(none)));
const knownOf = diffedNew.map((d) => d.writes);
const topics = {
  created: 'b.created',
  statusChanged: 'b.status_changed',
  updated: 'b.updated',
  deadLetter: 'b.dead_letter',
  state: 'b.state',
  deleted: 'b.deleted',
  heartbeat: 'b.heartbeat',
  changelog: 'b.changelog',
};
const encoder = new RecordEncoder({ topics } as BridgeConfig['kafka'], 'bench', DEFAULT_PRIVACY, logger);
const records = (i: number) => {
  const d = diffedNew[i]!;
  return encoder.commitRecords(
    d.changes.flatMap((c) => c.events),
    [],
    [],
    { entries: [...d.writes.entries()], checkpoint: { ...EMPTY_CHANGELOG_CHECKPOINT, txn: 1, epoch: 1 } },
    1_048_576,
  );
};
const outgoing = pages.map((_, i) => records(i));

// The machine's speed, as the fastest probe seen: every stage is given at that speed.
let probeReference = Infinity;
for (let i = 0; i < 20; i++) probeReference = Math.min(probeReference, speedProbe(1));

/**
 * Microseconds per review of `stage` over every page at the reference speed: each repeat (after one warm-up) is
 * timed between two probes and scaled by their mean against the reference; the median of the repeats.
 */
async function time(stage: (page: number) => unknown): Promise<number> {
  const scaled: number[] = [];
  for (let r = 0; r <= REPEAT; r++) {
    const before = speedProbe(1);
    const t0 = performance.now();
    for (let p = 0; p < PAGES; p++) await stage(p);
    const us = ((performance.now() - t0) * 1000) / (PAGES * PAGE_SIZE);
    const after = speedProbe(1);
    const probe = (before + after) / 2;
    probeReference = Math.min(probeReference, before, after);
    if (r > 0) scaled.push(us / probe);
  }
  return round(percentile(scaled, 50) * probeReference, 2);
}

const stages: Record<string, number> = {};
stages.parseAndValidate = await time((p) => parse(bodies[p]!));
stages.diffNew = await time((p) => diffPage(pages[p]!, input(none)));
stages.diffUnchanged = await time((p) => diffPage(pages[p]!, input(knownOf[p]!)));
stages.kafkaRecords = await time(records);
stages.kafkaBatches = await time(async (p) => {
  for (const { messages } of byTopic(outgoing[p]!)) {
    const recordPlans = messages.map((m, i) => Record.plan({ ...m, offsetDelta: i, timestampDelta: 0 }));
    await RecordBatch({ recordPlans, compression: 0 });
  }
});
stages.redisEntries = await time((p) => {
  for (const entry of knownOf[p]!.values()) encodeEntry(entry);
});
const newReview = round(
  stages.parseAndValidate! + stages.diffNew! + stages.kafkaRecords! + stages.kafkaBatches! + stages.redisEntries!,
  2,
);
const unchangedReview = round(stages.parseAndValidate! + stages.diffUnchanged!, 2);
const result = {
  label: LABEL || null,
  machine: machine(),
  setup: `${PAGES} pages of ${PAGE_SIZE} simulator reviews, median of ${REPEAT} repeats scaled to the probe's fastest speed, µs per review`,
  stages,
  newReview,
  unchangedReview,
};
console.log(JSON.stringify(result.stages), { newReview, unchangedReview });
console.log(`written ${writeResult(LABEL ? `page-path-${LABEL}` : 'page-path', result)}`);
process.exit(0);
