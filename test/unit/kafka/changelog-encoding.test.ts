import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/config.js';
import { loadAccounts } from '../../../src/config/accounts.js';
import { decodeChangelogRecord, EMPTY_CHANGELOG_CHECKPOINT } from '../../../src/core/changelog.js';
import { RecordEncoder } from '../../../src/kafka/encoding.js';
import { DEFAULT_PRIVACY } from '../../../src/config/privacy.js';
import { sampleEntry } from '../../helpers/entries.js';
import { MINIMAL_ENV } from '../../helpers/config.js';
import { silentLogger } from '../../helpers/fakes.js';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Every changelog record names the deployment and account that wrote it; every checkpoint the deployment and
// upstream. Before, a single-account deployment wrote plain keys and nothing else, so a second deployment on the
// same topic restored the first one's snapshot as its own (issue 36).

describe('changelog records', () => {
  it('name their deployment and account in headers, and the checkpoint its deployment and upstream', () => {
    const config = loadConfig({ ...MINIMAL_ENV, BRIDGE_ACCOUNT: 'acme' });
    const encoder = new RecordEncoder(config.kafka, 'acme', DEFAULT_PRIVACY, silentLogger);
    const entry = { ...sampleEntry(4, 1), keyId: 1 };
    const checkpoint = { ...EMPTY_CHANGELOG_CHECKPOINT, txn: 3, epoch: 2 };
    const out = encoder.commitRecords([], [], [], { entries: [[4, entry]], checkpoint }, 1024 * 1024);
    expect(out.map((o) => [o.topic, o.message.key])).toEqual([
      [config.kafka.topics.changelog, 'e:4'],
      [config.kafka.topics.changelog, 'checkpoint'],
    ]);
    for (const { message } of out) {
      expect(message.headers).toMatchObject({
        'bridge-txn': '3',
        'bridge-deployment': config.kafka.identity!.deployment,
        'bridge-account': 'acme',
      });
    }
    const ckpt = out[1]!.message;
    expect(decodeChangelogRecord('checkpoint', Buffer.from(ckpt.value as string))).toMatchObject({
      kind: 'checkpoint',
      identity: config.kafka.identity,
    });
  });

  it('of several accounts sharing the changelog carry the account in their keys, whatever the event topics do', () => {
    const dir = mkdtempSync(join(tmpdir(), 'accounts-'));
    const secret = join(dir, 'secret');
    writeFileSync(secret, 'shh');
    const file = join(dir, 'accounts.yaml');
    const entry = (id: string) => ({ id, upstream: { clientId: `c-${id}`, clientSecretFile: secret } });
    writeFileSync(file, JSON.stringify({ accounts: [entry('a'), entry('b')] }));
    // Event topics per account (keys stay plain), the changelog left to its default (one per deployment).
    const perAccount = Object.fromEntries(
      ['CREATED', 'STATUS_CHANGED', 'UPDATED', 'DEAD_LETTER', 'STATE', 'DELETED', 'HEARTBEAT'].map((t) => [
        `KAFKA_TOPIC_${t}`,
        `{account}.${t.toLowerCase()}`,
      ]),
    );
    const { BRIDGE_ACCOUNT: _single, ...env } = MINIMAL_ENV;
    const { accounts } = loadAccounts({ ...env, ...perAccount, BRIDGE_ACCOUNTS_FILE: file });
    const [a, b] = accounts;
    expect(a!.kafka.topics.changelog).toBe(b!.kafka.topics.changelog);
    expect(a!.kafka.identity!.deployment).toBe(b!.kafka.identity!.deployment);
    expect(a!.kafka.keyPrefix).toBeUndefined();
    expect([a!.kafka.changelogKeyPrefix, b!.kafka.changelogKeyPrefix]).toEqual(['a:', 'b:']);
    const encoder = new RecordEncoder(a!.kafka, 'a', DEFAULT_PRIVACY, silentLogger);
    const checkpoint = { ...EMPTY_CHANGELOG_CHECKPOINT, txn: 1, epoch: 1 };
    const out = encoder.commitRecords([], [], [], { entries: [], checkpoint }, 1024 * 1024);
    expect(out.map((o) => o.message.key)).toEqual(['a:checkpoint']);
  });
});
