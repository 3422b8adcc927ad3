import type { FaultClass } from '../plan.js';

// Mutants of the product code (src/), each a textual edit the gate (gate.ts) applies to a scratch copy of the
// repository, never to the working tree. An edit names its file, the exact original text (found exactly once, or the
// gate stops: a refactor must not disable a mutant silently) and its replacement. A Lua script's mutant edits the
// script and its model in test/sim/lua-models.ts alike (the simulation runs the model; the equivalence test runs
// both on a real Redis), or the script alone (then the equivalence test is what must find it).

/** One textual edit of a file. */
export interface Edit {
  file: string;
  from: string;
  to: string;
}

/** A product mutant: its edits, the fault classes of its simulation run, and the tests that apply to it. */
export interface ProductMutant {
  name: string;
  /** What the mutant breaks, in the product's terms. */
  description: string;
  edits: Edit[];
  /** The fault classes the run enables (default: every class). */
  faults?: FaultClass[];
  /** Classes every schedule of the run has at least one fault of (the mutant's trigger). */
  focus: FaultClass[];
  /** Fast test files (unit project) that apply: run when the simulation missed the mutant. */
  unit?: string[];
  /** Integration test files that need the real Redis (REDIS_URL; skipped without it). */
  integration?: string[];
  /** One of the four mutants issue 48 names: the CI subset runs these. */
  named?: boolean;
  /**
   * Why the gate lets it survive (equivalent, or waiting on a fault class), as docs/testing.md explains it; a
   * survivor without this fails the gate.
   */
  survivor?: string;
}

const COMMIT = 'src/bridge/pipeline/commit.ts';
const COMMIT_LUA = 'src/redis/lua/commit.lua';
const REMOVE_LUA = 'src/redis/lua/remove.lua';
const MODELS = 'test/sim/lua-models.ts';
const RESTORE = 'src/bridge/restore.ts';
const LUA_EQUIVALENCE = 'test/integration/sim/lua-models.test.ts';

/** The product mutants, in the order the gate runs them. */
export const PRODUCT_MUTANTS: ProductMutant[] = [
  {
    name: 'guard-noop',
    description: 'Committer.guard() is a no-op: a Kafka commit of unknown outcome no longer blocks reads and commits',
    named: true,
    edits: [
      {
        file: COMMIT,
        from: 'guard(): void {\n    if (this.unresolved) throw this.unresolved.err;\n  }',
        to: 'guard(): void {}',
      },
    ],
    focus: ['kafka-commit-lost'],
    faults: ['kafka-commit-lost', 'crash'],
    unit: ['test/unit/bridge/unresolved-commit.test.ts'],
  },
  {
    name: 'catch-up-no-flush',
    description: 'a read no longer writes the pending Redis write of a Kafka commit first (catchUp only guards)',
    named: true,
    edits: [
      {
        file: COMMIT,
        from: '    this.guard();\n    await this.flushPending();\n  }',
        to: '    this.guard();\n  }',
      },
    ],
    focus: ['redis-refuse-writes'],
  },
  {
    name: 'commit-lua-no-fence',
    description: "commit.lua (and its model) no longer checks the lease epoch: a superseded leader's write lands",
    named: true,
    edits: [
      {
        file: COMMIT_LUA,
        from: "if current ~= ARGV[1] then\n  return redis.error_reply('FENCED: epoch ' .. ARGV[1] .. ' superseded by ' .. tostring(current))\nend\n\nlocal pairs_count",
        to: 'local pairs_count',
      },
      {
        file: MODELS,
        from: 'export function commitScript(data: ScriptData, keys: string[], argv: Arg[]): number {\n  fence(data, keys[0]!, str(argv[0]!));',
        to: "export function commitScript(data: ScriptData, keys: string[], argv: Arg[]): number {\n  if (getString(data, keys[0]!) === null) throw new ScriptErrorReply('LOST: the account keys are gone');",
      },
    ],
    focus: ['freeze', 'crash', 'redis-failover'],
    faults: ['freeze', 'crash', 'redis-failover', 'kafka-only-fence', 'kafka-commit-lost', 'redis-refuse-writes'],
    // The simulation cannot see it (docs/testing.md: what a superseded leader's unfenced writes can do repeats or
    // rewinds what only costs re-reading); the real script's fence can: a restore finish (no expect_txn) and a
    // checkpoint-only write of a superseded leader, each refused and changing nothing.
    integration: ['test/integration/redis/commit-fence.test.ts'],
  },
  {
    name: 'reused-txn',
    description: "a page's commit reuses the changelog transaction number of the commit before it",
    named: true,
    edits: [
      {
        file: COMMIT,
        from: 'const changelog = { ...next, txn: position.txn + 1, epoch };',
        to: 'const changelog = { ...next, txn: position.txn, epoch };',
      },
    ],
    focus: ['crash', 'redis-failover'],
  },
  {
    name: 'deletion-reused-txn',
    description: "a deletion's commit reuses the changelog transaction number of the commit before it",
    edits: [
      {
        file: COMMIT,
        from: 'const changelog = { ...position, txn: position.txn + 1, epoch };',
        to: 'const changelog = { ...position, txn: position.txn, epoch };',
      },
    ],
    // A deletion's commit whose answer is lost though it landed: the restore that follows reads its records.
    focus: ['kafka-commit-lost'],
    // A deletion whose Redis part is missed: the next leadership's tail restore skips its records (their
    // transaction is Redis's own) and the review is reported deleted again.
    unit: ['test/unit/bridge/restore.test.ts'],
  },
  {
    name: 'redis-before-kafka',
    description: "commit order: a page's entries go to Redis before its events go to Kafka",
    edits: [
      {
        file: COMMIT,
        from: '    const t0 = performance.now();\n    const offsets = await this.unknownKept(',
        to: '    await this.write(epoch, entries, update);\n    const t0 = performance.now();\n    const offsets = await this.unknownKept(',
      },
    ],
    focus: ['kafka-send'],
  },
  {
    name: 'remove-before-kafka',
    description: "commit order: a deletion's entries leave Redis before its review.deleted reaches Kafka",
    edits: [
      {
        file: COMMIT,
        from: '    await this.catchUp();\n    const position = (this.position ??= await this.loadPosition(epoch));\n    const changelog = { ...position, txn: position.txn + 1, epoch };',
        to: '    await this.catchUp();\n    const early = await remove(epoch, entries);\n    const position = (this.position ??= await this.loadPosition(epoch));\n    const changelog = { ...position, txn: position.txn + 1, epoch };',
      },
      {
        file: COMMIT,
        from: '    const removal: Removal = { entries, remove, removed: null };',
        to: '    const removal: Removal = { entries, remove: async () => early, removed: null };',
      },
    ],
    focus: ['kafka-send', 'crash'],
    // The simulation killed it at 136 schedules of seed 48 before freeze-in-restore and redis-loss-mid-commit became
    // default classes, and missed it in 300 after (the plans moved); the unit test of the order kills it.
    unit: ['test/unit/bridge/failed-removal.test.ts'],
  },
  {
    name: 'page-order',
    description: 'commit order: a page is published without waiting for the page before it to be committed',
    edits: [
      {
        file: 'src/bridge/pipeline/run.ts',
        from: '    // Order: this page is published only after the page before it is committed.\n    await this.settle();\n',
        to: '',
      },
    ],
    focus: ['kafka-send', 'redis-refuse-writes'],
    unit: ['test/unit/bridge/pipeline.test.ts'],
  },
  {
    name: 'restore-takes-foreign-records',
    description: "restore identity: records another deployment wrote are restored as this deployment's",
    edits: [
      {
        file: RESTORE,
        from: 'if (mine && deployment !== null && deployment !== mine.deployment) {',
        to: 'if (false && mine && deployment !== null && deployment !== mine.deployment) {',
      },
    ],
    focus: ['redis-flush'],
    unit: ['test/unit/bridge/restore-identity.test.ts'],
  },
  {
    name: 'restore-trusts-redis-identity',
    description: "restore identity: Redis's checkpoint naming another deployment is not refused",
    edits: [{ file: RESTORE, from: 'if (mine && state.identity) refusals.checkRedis(state.identity, mine);', to: '' }],
    focus: ['redis-flush'],
    unit: ['test/unit/bridge/restore-identity.test.ts'],
  },
  {
    name: 'restore-offsets-unchecked',
    description: "restore identity: a changelog topic ending before Redis's last commit (recreated) is trusted",
    edits: [{ file: RESTORE, from: 'if (mine && !foreign) refusals.checkOffsets(state.offsets, ends);', to: '' }],
    focus: ['redis-failover'],
    unit: ['test/unit/bridge/restore-identity.test.ts', 'test/unit/bridge/restore.test.ts'],
  },
  {
    name: 'restore-tail-replays-all',
    description: "a tail restore applies the changelog's records Redis already holds too (older entries over newer)",
    edits: [{ file: RESTORE, from: 'if (record.txn <= after) continue;', to: 'if (record.txn < 0) continue;' }],
    focus: ['crash', 'redis-failover'],
    unit: ['test/unit/bridge/restore.test.ts'],
  },
  {
    name: 'restore-put-no-fence',
    description: "restore-put.lua (and its model) no longer checks the lease epoch: a superseded leader's batch lands",
    edits: [
      {
        file: 'src/redis/lua/restore-put.lua',
        from: "if current ~= ARGV[1] then\n  return redis.error_reply('FENCED: epoch ' .. ARGV[1] .. ' superseded by ' .. tostring(current))\nend\nlocal mode",
        to: 'local mode',
      },
      {
        file: MODELS,
        from: 'export function restorePutScript(data: ScriptData, keys: string[], argv: Arg[]): number {\n  fence(data, keys[0]!, str(argv[0]!));',
        to: "export function restorePutScript(data: ScriptData, keys: string[], argv: Arg[]): number {\n  if (getString(data, keys[0]!) === null) throw new ScriptErrorReply('LOST: the account keys are gone');",
      },
    ],
    // A leader frozen between reading the changelog and writing its batch, superseded meanwhile: freeze-in-restore
    // puts the freeze there (a random freeze missed it for 300 schedules).
    focus: ['freeze-in-restore'],
    faults: [
      'freeze-in-restore',
      'freeze',
      'crash',
      'redis-failover',
      'redis-flush',
      'redis-partial-loss',
      'kafka-only-fence',
    ],
    integration: ['test/integration/redis/commit-fence.test.ts'],
  },
  {
    name: 'commit-lua-no-manifest-check',
    description: 'manifest checks: commit.lua (and its model) no longer refuses a write into a vanished bucket',
    edits: [
      {
        file: COMMIT_LUA,
        from: "    if redis.call('HEXISTS', KEYS[4], bucket) == 1 and redis.call('HEXISTS', KEYS[k], 'm') == 0 then",
        to: '    if false then',
      },
      {
        file: MODELS,
        from: 'if (hasManifest && !sealing) checkBuckets(data, keys[3]!, keys.slice(4));',
        to: '',
      },
    ],
    // A bucket lost between a page's read (which checked it) and its commit: the commit recreates it in part.
    focus: ['redis-loss-mid-commit'],
    integration: ['test/integration/redis/partial-loss.test.ts'],
  },
  {
    name: 'read-no-manifest-check',
    description: 'manifest checks: a read no longer refuses a bucket that vanished (answers its reviews as absent)',
    edits: [
      {
        file: 'src/redis/snapshot-entries.ts',
        from: 'if (manifest[i + 1] !== null && values[values.length - 1] === null) {',
        to: 'if (false) {',
      },
    ],
    focus: ['redis-partial-loss'],
  },
  {
    name: 'scan-skips-vanished-bucket',
    description: "manifest checks: deletion detection's scan skips a bucket that vanished (the bug of seed 122)",
    edits: [{ file: 'src/redis/snapshot-entries.ts', from: 'if (gone !== undefined) {', to: 'if (false) {' }],
    focus: ['redis-partial-loss'],
    faults: ['redis-partial-loss', 'crash', 'compaction'],
  },
  {
    name: 'no-lookback',
    description: 'watermark and lookback: a poll starts at the watermark itself (no lookback, no paging allowance)',
    edits: [
      {
        file: 'src/bridge/passes/poll-state.ts',
        from: 'return Math.max(0, this.pagedFrom(watermark) - this.lookbackMs(now));',
        to: 'return Math.max(0, watermark);',
      },
    ],
    focus: [],
    unit: ['test/unit/bridge/poll-lookback.test.ts'],
  },
  {
    name: 'no-trailing-reads',
    description:
      'watermark and lookback: no trailing reads (a change shown late beyond the lookback waits for the next sweep)',
    edits: [
      {
        file: 'src/bridge/passes/poll-state.ts',
        from: 'trailingTiers({ overlapMs, boundMs, pollIntervalMs })',
        to: 'trailingTiers({ overlapMs, boundMs: 0, pollIntervalMs })',
      },
    ],
    focus: ['late-visibility'],
    unit: ['test/unit/bridge/poll-lookback.test.ts'],
  },
  {
    name: 'watermark-uncapped',
    description:
      "watermark and lookback: the watermark is not capped by the upstream's present (a stamp ahead hides later changes)",
    edits: [
      {
        file: 'src/core/upstream-present.ts',
        from: 'return Math.min(maxSeen, present);',
        to: 'return maxSeen;',
      },
    ],
    focus: ['stamps-ahead'],
    unit: ['test/unit/core/freshness.test.ts', 'test/unit/bridge/poll-lookback.test.ts'],
  },
  {
    name: 'stale-read-overrides',
    description: 'nothing goes backwards: a page fetched before the one that stored the entry may override it',
    edits: [
      {
        file: 'src/core/diff.ts',
        from: '    if (review.updated_date === prev.updatedDate && input.fetchedAt < prev.observedAt) return NOTHING;\n',
        to: '',
      },
    ],
    focus: [],
    unit: ['test/unit/core/diff.test.ts'],
  },
  {
    name: 'deletion-ignores-sweep-start',
    description: 'deletion inference: reviews first seen after the sweep started are taken as not listed (deleted)',
    edits: [
      {
        file: 'src/core/deletion.ts',
        from: 'if (!sawReview(id) && entry.observedAt < sweepStartedAt) missing.push([id, entry]);',
        to: 'if (!sawReview(id)) missing.push([id, entry]);',
      },
    ],
    focus: [],
    unit: ['test/unit/core/deletion.test.ts'],
  },
  {
    name: 'deletion-not-rechecked',
    description: 'deletion inference: a review a poll rewrote during the sweep is deleted all the same',
    edits: [
      {
        file: 'src/bridge/passes/deletions.ts',
        from: 'return now !== undefined && now.observedAt === scanned.observedAt && now.sequence === scanned.sequence;',
        to: 'return now !== undefined;',
      },
    ],
    focus: [],
    // The simulation rarely reaches it since a newest-first listing is read again before deciding (issue 48): a
    // review then escapes both reads only by moving twice. The loop test of a sweep that decides after a poll read
    // a review the sweep did not list (listed by id, so no second read) needs the re-check.
    unit: ['test/unit/bridge/deletion-cadence.test.ts', 'test/unit/bridge/deletion-recheck.test.ts'],
  },
  {
    name: 'remove-lua-unconditional',
    description:
      'remove.lua (and its model) removes an entry even when a poll rewrote it after the deletion was decided',
    edits: [
      {
        file: REMOVE_LUA,
        from: "  if redis.call('HGET', key, ARGV[i + 1]) == ARGV[i + 2] then",
        to: "  if redis.call('HEXISTS', key, ARGV[i + 1]) == 1 then",
      },
      { file: MODELS, from: 'if (held && held.equals(buf(argv[i + 2]!))) {', to: 'if (held) {' },
    ],
    focus: ['crash', 'freeze'],
    // The product never rewrites an entry between the deletion's last check and its removal (docs/testing.md); the
    // real script's check is what a test can see.
    integration: ['test/integration/redis/snapshot-store.test.ts'],
  },
  {
    name: 'remove-lua-script-only',
    description: "the real remove.lua no longer keeps a removed review's sequence in the gone hash (its model does)",
    edits: [{ file: REMOVE_LUA, from: "    redis.call('HSET', KEYS[3], ARGV[i + 3], ARGV[i + 4])\n", to: '' }],
    focus: [],
    integration: [LUA_EQUIVALENCE],
  },
  {
    name: 'lease-lua-no-time-floor',
    description: "lease-acquire.lua no longer raises a new epoch to Redis's time (epochs restart after a flush)",
    edits: [
      {
        file: 'src/redis/lua/lease-acquire.lua',
        from: 'if epoch < now then',
        to: 'if false then',
      },
      { file: MODELS, from: '  if (epoch < now) {\n    epoch = now;', to: '  if (false) {\n    epoch = now;' },
    ],
    focus: ['redis-flush'],
  },
  {
    name: 'dead-letters-forgotten',
    description: 'a dead letter is not remembered after its commit: a bad record is dead-lettered on every read',
    edits: [
      {
        file: 'src/bridge/pipeline/run.ts',
        from: '    await rememberDeadLetters(this.host.deps.snapshot, deadLetters.digests);\n',
        to: '',
      },
    ],
    focus: [],
    faults: ['malformed', 'crash'],
  },
];
