import { describe, expect, it } from 'vitest';
import { checkpointRecord, EMPTY_CHANGELOG_CHECKPOINT } from '../../../src/core/changelog.js';
import { ConfigError } from '../../../src/core/errors.js';
import { FingerprintKey, type FingerprintKeySource } from '../../../src/core/fingerprint-key.js';
import type { Identity } from '../../../src/core/identity.js';
import { FakeSink, FakeSnapshot, FakeSource, passesOnFakes } from '../../helpers/fakes.js';

// Identity first (issue 46, item 4): a leadership fences the transactional id, writes to the changelog and copies
// the fingerprint key only once the checks that read only have passed: the changelog topic fits and no other
// installation publishes into the account's topics (the sink's verifyBeforeActing), Redis's checkpoint is this
// deployment's; the key is copied only once the restore has trusted the changelog's own checkpoints.

const mine: Identity = { deployment: 'dmine', upstream: 'uone' };
const theirs: Identity = { deployment: 'dtheirs', upstream: 'uone' };

/** A sink whose checks before acting refuse with `refusal` (null: pass), recording what was asked of it. */
class CheckedSink extends FakeSink {
  refusal: ConfigError | null = null;
  readonly verified: Array<{ instance: string; windowMs: number }> = [];

  async verifyBeforeActing(redis: { instance: string }, windowMs: number): Promise<void> {
    this.verified.push({ instance: redis.instance, windowMs });
    if (this.refusal) throw this.refusal;
  }
}

/** A snapshot whose checkpoint names `identity` (null: none). */
class StampedSnapshot extends FakeSnapshot {
  identity: Identity | null = null;

  override async changelogState() {
    return { ...(await super.changelogState()), identity: this.identity };
  }
}

function setup() {
  const log: string[] = [];
  const snapshot = new StampedSnapshot(log);
  const sink = new CheckedSink(log);
  const copies: string[] = [];
  const key = new FingerprintKey(Buffer.alloc(32, 5));
  const keySource: FingerprintKeySource = {
    get: async () => key,
    persist: async () => void copies.push(`copied after ${sink.transactionsBegun} fence(s)`),
  };
  const passes = passesOnFakes(
    { snapshot, sink, source: new FakeSource([]), keySource },
    {
      changelog: { identity: mine, topic: 'changelog' },
      claims: { instance: async () => 'rmine', known: () => false, windowMs: 180_000 },
    },
  );
  return { passes, snapshot, sink, copies };
}

const signal = new AbortController().signal;

describe('identity before any action on Kafka', () => {
  it('fences and copies nothing when the checks before acting refuse (another installation, a changelog that does not fit)', async () => {
    const { passes, sink, copies } = setup();
    sink.refusal = new ConfigError(
      'BRIDGE_DEPLOYMENT_ID',
      'deployment dmine already runs account test with another Redis',
    );
    await expect(passes.prepare(1, signal)).rejects.toThrow(/BRIDGE_DEPLOYMENT_ID/);
    expect(sink.verified).toEqual([{ instance: 'rmine', windowMs: 180_000 }]);
    expect(sink.transactionsBegun).toBe(0);
    expect(copies).toEqual([]);
    expect(sink.changelog).toEqual([]);
  });

  it("fences and copies nothing when Redis's checkpoint is another deployment's", async () => {
    const { passes, snapshot, sink, copies } = setup();
    snapshot.identity = theirs;
    await expect(passes.prepare(1, signal)).rejects.toThrow(/BRIDGE_DEPLOYMENT_ID/);
    expect(sink.transactionsBegun).toBe(0);
    expect(copies).toEqual([]);
  });

  it("copies the key only after the restore trusted the changelog: never into another deployment's", async () => {
    const { passes, sink, copies } = setup();
    const r = checkpointRecord({ ...EMPTY_CHANGELOG_CHECKPOINT, txn: 3, epoch: 1, initialDone: true }, theirs);
    sink.changelog.push({ key: r.key, value: Buffer.from(r.value), txn: 3, deployment: theirs.deployment });
    await expect(passes.prepare(1, signal)).rejects.toThrow(/KAFKA_TOPIC_CHANGELOG/);
    expect(copies).toEqual([]);
    // Its own changelog: the key is copied once the restore is done, under the leadership's fence.
    const fresh = setup();
    expect(await fresh.passes.prepare(1, signal)).toBe(true);
    expect(fresh.copies).toEqual(['copied after 1 fence(s)']);
  });
});
