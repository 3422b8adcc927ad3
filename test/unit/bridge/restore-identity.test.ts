import { describe, expect, it } from 'vitest';
import { restoreFromChangelog, type RestorePorts, type RestoreRecord } from '../../../src/bridge/restore.js';
import {
  EMPTY_CHANGELOG_CHECKPOINT,
  checkpointRecord,
  entryRecord,
  type ChangelogCheckpoint,
} from '../../../src/core/changelog.js';
import { ConfigError } from '../../../src/core/errors.js';
import type { Identity } from '../../../src/core/identity.js';
import type { SnapshotEntry } from '../../../src/core/snapshot-entry.js';
import { sampleEntry } from '../../helpers/entries.js';
import { changelogPolicyFits } from '../../../src/kafka/topic-admin.js';
import { silentLogger } from '../../helpers/fakes.js';
import { pino } from 'pino';
import { FailureLog } from '../../../src/bridge/loop/failures.js';

// Whose changelog a restore trusts: records of another deployment are skipped, a checkpoint of another deployment or
// upstream (in Redis or in the changelog) stops the start with a line naming the settings, records written before
// identities need something to vouch for them, and a topic that ends before Redis's last commit is not Redis's.

const mine: Identity = { deployment: 'dmine', upstream: 'uone' };
const theirs: Identity = { deployment: 'dtheirs', upstream: 'uone' };
const entry = (id: number): SnapshotEntry => ({ ...sampleEntry(id, 1), keyId: 1 });
const ckpt = (txn: number): ChangelogCheckpoint => ({
  ...EMPTY_CHANGELOG_CHECKPOINT,
  txn,
  epoch: 1,
  initialDone: true,
});

function entryRec(id: number, txn: number, by: Identity | null): RestoreRecord {
  return { ...entryRecord(id, entry(id)), txn, deployment: by?.deployment ?? null };
}
function ckptRec(txn: number, by: Identity | null): RestoreRecord {
  const r = checkpointRecord(ckpt(txn), by ?? undefined);
  return { key: r.key, value: Buffer.from(r.value), txn, deployment: by?.deployment ?? null };
}

/** Restore ports over an in-memory Redis and a changelog of `records` ending at `end` (one partition). */
function ports(records: RestoreRecord[], redis: Partial<Awaited<ReturnType<RestorePorts['changelogState']>>> = {}) {
  const state = { txn: null, offsets: {}, cluster: 'c1', empty: true, sealed: true, identity: null, ...redis };
  const written = new Map<number, SnapshotEntry | null>();
  const seen = { cleared: 0, stamped: null as Identity | null, finished: null as ChangelogCheckpoint | null };
  const p: RestorePorts = {
    changelogState: async () => state,
    clearForRestore: async () => void (seen.cleared += 1),
    restoreEntries: async (_epoch, entries) => entries.forEach(([id, e]) => written.set(id, e)),
    restoreFinish: async (_epoch, c) => ((seen.finished = c), true),
    setKafkaCluster: async () => undefined,
    stampIdentity: async (id) => void (seen.stamped = id),
    seal: async () => undefined,
    sealIfComplete: async () => true,
    readChangelog: async (_from, onRecords) => (await onRecords(records), { 0: records.length }),
    clusterId: async () => 'c1',
  };
  return { p, written, seen };
}

const deps = (extra: object = {}) => ({
  logger: silentLogger,
  metrics: { restoreFinished: () => undefined },
  clock: Date.now,
  identity: mine,
  topic: 'shared.changelog',
  account: 'acme',
  ...extra,
});

async function refusal(run: Promise<unknown>): Promise<ConfigError> {
  const err = await run.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return err as ConfigError;
}

describe('restore: whose changelog it is', () => {
  it("skips another deployment's entries and restores its own; Redis is stamped with who it belongs to", async () => {
    const { p, written, seen } = ports([entryRec(1, 1, mine), entryRec(2, 1, theirs), ckptRec(1, mine)]);
    const outcome = await restoreFromChangelog(p, deps(), 5);
    expect(outcome.txn).toBe(1);
    expect([...written.keys()]).toEqual([1]);
    expect(seen.stamped).toEqual(mine);
  });

  it('refuses a changelog checkpoint of another deployment before touching Redis, naming the settings', async () => {
    // Issue 36's first finding: a second deployment on the first one's changelog restored its snapshot as its own.
    const { p, seen } = ports([entryRec(1, 1, theirs), ckptRec(1, theirs)]);
    const err = await refusal(restoreFromChangelog(p, deps(), 5));
    expect(err.setting).toBe('KAFKA_TOPIC_CHANGELOG');
    expect(err.message).toContain('shared.changelog');
    expect(err.message).toContain('deployment dtheirs');
    expect(err.message).toContain('BRIDGE_DEPLOYMENT_ID=dtheirs');
    expect(seen.cleared).toBe(0);
    expect(seen.finished).toBeNull();
  });

  it('refuses a checkpoint of the same deployment written for another upstream', async () => {
    const otherUpstream = { deployment: 'dmine', upstream: 'utwo' };
    const { p } = ports([ckptRec(1, otherUpstream)]);
    const err = await refusal(restoreFromChangelog(p, deps(), 5));
    expect(err.message).toContain('upstream utwo');
    expect(err.message).toContain('UPSTREAM_BASE_URL');
  });

  it('refuses a Redis whose checkpoint another deployment wrote, before reading anything', async () => {
    const { p } = ports([ckptRec(1, mine)], { txn: 1, empty: false, identity: theirs });
    const err = await refusal(restoreFromChangelog(p, deps(), 5));
    expect(err.setting).toBe('BRIDGE_DEPLOYMENT_ID');
    expect(err.message).toContain('REDIS_KEY_PREFIX');
  });

  it('takes records written before identities only when something vouches for them', async () => {
    const legacy = [entryRec(1, 1, null), ckptRec(1, null)];
    // Nothing does: an empty Redis, no checkpoint of this deployment in the topic.
    const err = await refusal(restoreFromChangelog(ports(legacy).p, deps(), 5));
    expect(err.message).toContain('KAFKA_CHANGELOG_ADOPT_LEGACY');
    // Redis reflects a changelog transaction (an upgrade with Redis intact): adopted.
    const vouched = ports(legacy, { txn: 0, empty: false });
    expect((await restoreFromChangelog(vouched.p, deps(), 5)).txn).toBe(1);
    // A checkpoint of this deployment adopted them before (Redis lost since).
    const stamped = ports([...legacy, entryRec(2, 2, mine), ckptRec(2, mine)]);
    await restoreFromChangelog(stamped.p, deps(), 5);
    expect([...stamped.written.keys()].sort()).toEqual([1, 2]);
    // The operator says so.
    await restoreFromChangelog(ports(legacy).p, deps({ adoptLegacy: true }), 5);
  });

  it("refuses a topic that ends before the offsets of Redis's last commit (deleted and created again)", async () => {
    const { p } = ports([], { txn: 7, empty: false, identity: mine, offsets: { 0: 40 } });
    const err = await refusal(restoreFromChangelog(p, deps(), 5));
    expect(err.setting).toBe('KAFKA_TOPIC_CHANGELOG');
    expect(err.message).toMatch(/deleted and created again/);
  });
});

/**
 * Restore ports whose changelog is one partition of this account's records at the given offsets (other accounts'
 * records, which the reader filters out, only move the end to `end`); reads honour their start offset.
 */
function placed(records: Array<[offset: number, record: RestoreRecord]>, end: number, redis: object) {
  const base = ports([], { empty: false, identity: mine, ...redis });
  const reads: Array<Record<number, number>> = [];
  base.p.readChangelog = async (from, onRecords) => {
    reads.push(from);
    const start = from[0] ?? 0;
    await onRecords(records.filter(([o]) => o >= start).map(([offset, r]) => ({ ...r, partition: 0, offset })));
    return { 0: end };
  };
  return { ...base, reads };
}
const marker = (): RestoreRecord => ({
  key: 'restore-marker',
  value: Buffer.from('n'),
  txn: 0,
  deployment: mine.deployment,
});

describe('restore: a changelog topic created again that other accounts write to', () => {
  // Issue 46, item 5: other accounts' writes pushed the new topic's ends past the offsets of this account's last
  // commit, so the end-offset check passes. Redis must not be trusted to that topic, nor cleared for it.
  it('refuses at the next start (a tail) when the topic holds nothing of the account', async () => {
    const { p, seen } = placed([], 900, { txn: 7, offsets: { 0: 40 } });
    const err = await refusal(restoreFromChangelog(p, deps(), 5));
    expect(err.setting).toBe('KAFKA_TOPIC_CHANGELOG');
    expect(err.message).toContain('transaction 7');
    expect(err.message).toMatch(/deleted and created again/);
    expect(seen.cleared).toBe(0);
  });

  it('refuses a full restore before clearing Redis when the topic holds only later, partial history', async () => {
    // The account wrote two reviews to the new topic (transactions 1 and 2 there); Redis reflects transaction 7.
    const history: Array<[number, RestoreRecord]> = [
      [300, entryRec(1, 1, mine)],
      [301, ckptRec(1, mine)],
      [500, entryRec(2, 2, mine)],
      [501, ckptRec(2, mine)],
    ];
    const { p, seen, written } = placed(history, 900, { txn: 7, offsets: { 0: 40 } });
    const err = await refusal(restoreFromChangelog(p, deps(), 5, true));
    expect(err.message).toContain('newest checkpoint of the account: 2');
    expect(seen.cleared).toBe(0);
    expect(written.size).toBe(0);
    expect(seen.finished).toBeNull();
  });

  it('refuses a topic created again under a running leader, though it holds a later checkpoint: it ends before Redis', async () => {
    // The topic was deleted and created again while a leader ran: its next commit (transaction 8) went to the new
    // topic, at its first offsets, and the leader stopped before its Redis part. Redis reflects transaction 7 at
    // offset 40 of the old topic. The new topic's checkpoint 8 vouches for it (at or after Redis's transaction),
    // but it ends before Redis's offsets: a tail read from there would see nothing, and commit 8 would be derived
    // and published again, onto a changelog that holds nothing of the history before it.
    const { p, seen, written } = placed(
      [
        [0, entryRec(3, 8, mine)],
        [1, ckptRec(8, mine)],
      ],
      4,
      { txn: 7, offsets: { 0: 40 } },
    );
    const err = await refusal(restoreFromChangelog(p, deps(), 5));
    expect(err.setting).toBe('KAFKA_TOPIC_CHANGELOG');
    expect(err.message).toMatch(/ends before the records Redis's last commit .* wrote \(partition 0: 4 < 40\)/);
    expect(written.size).toBe(0);
    expect(seen.finished).toBeNull();
  });

  it("trusts the topic that holds the last commit's record at Redis's offset, with no second read", async () => {
    const { p, reads } = placed(
      [
        [40, entryRec(3, 7, mine)],
        [41, ckptRec(7, mine)],
      ],
      900,
      { txn: 7, offsets: { 0: 40 } },
    );
    expect((await restoreFromChangelog(p, deps(), 5)).kind).toBe('tail');
    expect(reads).toEqual([{ 0: 40 }]);
  });

  it("trusts an end marker of an earlier restore at Redis's offset (Redis's offsets after a restore)", async () => {
    const { p, reads } = placed([[40, marker()]], 900, { txn: 7, offsets: { 0: 40 } });
    await restoreFromChangelog(p, deps(), 5);
    expect(reads).toEqual([{ 0: 40 }]);
    // A full restore checks from Redis's offsets first, then reads everything.
    const full = placed(
      [
        [12, ckptRec(7, mine)],
        [40, marker()],
      ],
      900,
      { txn: 7, offsets: { 0: 40 } },
    );
    expect((await restoreFromChangelog(full.p, deps(), 5, true)).txn).toBe(7);
    expect(full.reads).toEqual([{ 0: 40 }, {}]);
  });

  it('trusts, after a scan, a topic whose record at the offset compaction removed but that holds the checkpoint', async () => {
    // Redis's offsets are an earlier restore's end markers; a later restore's markers (which found nothing, so Redis
    // kept its offsets) let compaction drop them. The checkpoint of transaction 7 stands before them.
    const { p, reads } = placed(
      [
        [12, ckptRec(7, mine)],
        [80, marker()],
      ],
      900,
      { txn: 7, offsets: { 0: 40 } },
    );
    expect((await restoreFromChangelog(p, deps(), 5)).kind).toBe('tail');
    expect(reads).toEqual([{ 0: 40 }, {}]);
    // Commits Redis missed, that rewrote the keys of its last one: the tail itself sees their newer checkpoint.
    const missed = placed(
      [
        [60, entryRec(3, 8, mine)],
        [61, ckptRec(8, mine)],
      ],
      900,
      { txn: 7, offsets: { 0: 40 } },
    );
    expect((await restoreFromChangelog(missed.p, deps(), 5)).txn).toBe(8);
    expect(missed.reads).toEqual([{ 0: 40 }]);
  });

  it("is not vouched for by another deployment's record at the offset, nor by a record of another transaction", async () => {
    const other = { ...entryRec(3, 7, theirs) };
    for (const record of [other, entryRec(3, 2, mine)]) {
      const { p } = placed([[40, record]], 900, { txn: 7, offsets: { 0: 40 } });
      await refusal(restoreFromChangelog(p, deps(), 5));
    }
  });
});

describe('restore: upgrading from the former default changelog topic', () => {
  it('refuses when Redis reflects a changelog of the former version and the former default topic exists', async () => {
    // Redis says the account has a history (transaction 3), written before identities; this deployment's own default
    // topic is new. Its history is in the former default topic: trusting the new one would start over silently.
    const { p } = ports([], { txn: 3, empty: false, identity: null });
    p.formerChangelog = () => 'reviews-bridge.changelog';
    const err = await refusal(restoreFromChangelog(p, deps(), 5));
    expect(err.message).toContain('KAFKA_TOPIC_CHANGELOG=reviews-bridge.changelog');
    // A deployment with no history (nothing in Redis) starts its own topic; the former one may be anyone's.
    const fresh = ports([]);
    fresh.p.formerChangelog = () => 'reviews-bridge.changelog';
    expect((await restoreFromChangelog(fresh.p, deps(), 5)).txn).toBe(0);
  });
});

describe('changelog topic policy', () => {
  it('fits only compaction without deletion', () => {
    expect(changelogPolicyFits('compact')).toBe(true);
    expect(changelogPolicyFits('delete')).toBe(false);
    expect(changelogPolicyFits('compact,delete')).toBe(false);
    expect(changelogPolicyFits('delete, compact')).toBe(false);
    expect(changelogPolicyFits(undefined)).toBe(false);
  });
});

describe('a refused start in the log', () => {
  it('is one error line with the refusal itself, not repeated at every retry', () => {
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const log = new FailureLog({ logger, timing: { pollIntervalMs: 1_000, sweepIntervalMs: 0, leaseTtlMs: 3_000 } });
    const refused = new ConfigError('KAFKA_TOPIC_CHANGELOG', 'changelog topic t has cleanup.policy=delete');
    for (let i = 0; i < 4; i++) log.fail(refused, 'pass');
    const errors = lines.filter((l) => l.level === 50);
    expect(errors.map((l) => l.msg)).toEqual([
      'invalid configuration: KAFKA_TOPIC_CHANGELOG: changelog topic t has cleanup.policy=delete',
    ]);
    expect(errors[0]!.refused).toBe(true);
  });
});
