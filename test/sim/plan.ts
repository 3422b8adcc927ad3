import fc from 'fast-check';
import type { ListingOrder } from './upstream.js';

// A schedule: what the upstream does and which faults strike when, for two or three replicas. Everything a
// schedule does is in its plan and in the scheduler's choices, both drawn by fast-check from the seed alone, so a
// seed replays exactly (and fast-check can shrink a failing plan to a smaller one).

/** The fault classes the world can inject; a schedule draws faults only from the enabled ones. */
export const FAULT_CLASSES = [
  'crash',
  'freeze',
  'redis-flush',
  'redis-failover',
  'kafka-send',
  'compaction',
  'upstream-faults',
  'malformed',
  'clock-offset',
  'listing-order',
  'redis-partial-loss',
  'redis-refuse-writes',
  'kafka-commit-lost',
  'foreign-deployment',
  'kafka-only-fence',
] as const;

/** One fault class. */
export type FaultClass = (typeof FAULT_CLASSES)[number];

/**
 * The classes every run draws from: all of them, now that issue 36's fixes have landed (partial-loss detection and
 * the write-refusal guard for redis-partial-loss and redis-refuse-writes, the unresolved-commit guard across runs for
 * kafka-commit-lost, deployment identity for foreign-deployment, a Kafka-only fence releasing the lease for
 * kafka-only-fence: a freeze holding a Kafka InitProducerId, a failover losing a lease write, two leaders at once).
 */
export const DEFAULT_FAULTS: readonly FaultClass[] = FAULT_CLASSES;

/** Virtual time of the fault phase (ms): upstream changes and faults happen within it. */
export const FAULT_PHASE_MS = 120_000;
/** Virtual time after the fault phase in which the feed must catch up (no change, no fault). */
export const QUIET_TAIL_MS = 300_000;

/** A change of the upstream (the review `pick` chooses among those that exist then). */
export interface Change {
  at: number;
  kind: 'status' | 'edit' | 'silent-edit' | 'create' | 'delete' | 'malformed';
  pick: number;
  /** How long after its updated_date the change becomes visible in the listing. */
  lagMs: number;
}

/** A fault, at a time of the fault phase. */
export type Fault =
  | { kind: 'crash'; at: number; replica: number; afterSteps: number; after: boolean; downMs: number }
  | { kind: 'freeze'; at: number; replica: number; ms: number }
  | { kind: 'redis-flush'; at: number }
  | {
      kind: 'redis-partial-loss';
      at: number;
      share: number;
      /** What goes: a share of the snapshot buckets, the generated fingerprint key, or the checkpoint alone. */
      keys: 'buckets' | 'fingerprint-key' | 'checkpoint';
    }
  | { kind: 'redis-failover'; at: number; writes: number }
  | { kind: 'redis-refuse-writes'; at: number; ms: number; reply: 'oom' | 'readonly' }
  | { kind: 'kafka-send'; at: number; ms: number }
  | { kind: 'kafka-commit-lost'; at: number; ms: number; landed: boolean; sweepOnly: boolean }
  | { kind: 'compaction'; at: number }
  | { kind: 'upstream-fault'; at: number; ms: number; fault: 'throttled' | 'server' | 'network' };

/** One schedule's plan. */
export interface Plan {
  replicas: number;
  reviews: number;
  order: ListingOrder;
  pageSize: number;
  clockOffsetMs: number;
  /** The seed of the backoff jitter draws. */
  jitterSeed: number;
  changes: Change[];
  faults: Fault[];
}

const at = fc.integer({ min: 0, max: FAULT_PHASE_MS - 1 });

function faultArb(kind: Fault['kind'], replicas: number): fc.Arbitrary<Fault> {
  const replica = fc.integer({ min: 0, max: replicas - 1 });
  switch (kind) {
    case 'crash':
      return fc.record({
        kind: fc.constant('crash' as const),
        at,
        replica,
        afterSteps: fc.integer({ min: 1, max: 40 }),
        after: fc.boolean(),
        downMs: fc.integer({ min: 0, max: 30_000 }),
      });
    case 'freeze':
      return fc.record({
        kind: fc.constant('freeze' as const),
        at,
        replica,
        ms: fc.integer({ min: 2_000, max: 40_000 }),
      });
    case 'redis-flush':
      return fc.record({ kind: fc.constant('redis-flush' as const), at });
    case 'redis-partial-loss':
      return fc.record({
        kind: fc.constant('redis-partial-loss' as const),
        at,
        share: fc.double({ min: 0.2, max: 0.8, noNaN: true }),
        keys: fc.constantFrom(
          'buckets' as const,
          'buckets' as const,
          'fingerprint-key' as const,
          'checkpoint' as const,
        ),
      });
    case 'redis-failover':
      return fc.record({ kind: fc.constant('redis-failover' as const), at, writes: fc.integer({ min: 1, max: 4 }) });
    case 'redis-refuse-writes':
      return fc.record({
        kind: fc.constant('redis-refuse-writes' as const),
        at,
        ms: fc.integer({ min: 1_000, max: 40_000 }),
        reply: fc.constantFrom('oom' as const, 'readonly' as const),
      });
    case 'kafka-send':
      return fc.record({ kind: fc.constant('kafka-send' as const), at, ms: fc.integer({ min: 500, max: 20_000 }) });
    case 'kafka-commit-lost':
      return fc.record({
        kind: fc.constant('kafka-commit-lost' as const),
        at,
        ms: fc.integer({ min: 0, max: 15_000 }),
        landed: fc.boolean(),
        sweepOnly: fc.boolean(),
      });
    case 'compaction':
      return fc.record({ kind: fc.constant('compaction' as const), at });
    case 'upstream-fault':
      return fc.record({
        kind: fc.constant('upstream-fault' as const),
        at,
        ms: fc.integer({ min: 500, max: 30_000 }),
        fault: fc.constantFrom('throttled' as const, 'server' as const, 'network' as const),
      });
  }
}

const FAULT_KINDS: Record<FaultClass, Fault['kind'] | null> = {
  crash: 'crash',
  freeze: 'freeze',
  'redis-flush': 'redis-flush',
  'redis-failover': 'redis-failover',
  'kafka-send': 'kafka-send',
  compaction: 'compaction',
  'upstream-faults': 'upstream-fault',
  malformed: null,
  'clock-offset': null,
  'listing-order': null,
  'kafka-only-fence': null,
  'redis-partial-loss': 'redis-partial-loss',
  'redis-refuse-writes': 'redis-refuse-writes',
  'kafka-commit-lost': 'kafka-commit-lost',
  'foreign-deployment': null,
};

/**
 * The plans of schedules with the given fault classes; with `focus`, every plan has at least one fault of those
 * classes (a mutant's run: its fault in every schedule).
 */
export function planArb(enabled: ReadonlySet<FaultClass>, focus: readonly FaultClass[] = []): fc.Arbitrary<Plan> {
  const kinds = [...enabled].map((c) => FAULT_KINDS[c]).filter((k): k is Fault['kind'] => k !== null);
  const focusKinds = focus.map((c) => FAULT_KINDS[c]).filter((k): k is Fault['kind'] => k !== null);
  const changeKinds: Change['kind'][] = ['status', 'status', 'status', 'edit', 'silent-edit', 'create', 'delete'];
  if (enabled.has('malformed')) changeKinds.push('malformed');
  return fc.integer({ min: 2, max: 3 }).chain((replicas) =>
    fc.record({
      replicas: fc.constant(replicas),
      reviews: fc.integer({ min: 6, max: 30 }),
      order: enabled.has('listing-order')
        ? fc.constantFrom('id-asc' as const, 'id-desc' as const, 'updated-asc' as const)
        : fc.constant('id-asc' as const),
      pageSize: fc.integer({ min: 2, max: 8 }),
      clockOffsetMs: enabled.has('clock-offset') ? fc.integer({ min: -120_000, max: 120_000 }) : fc.constant(0),
      jitterSeed: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
      changes: fc.array(
        fc.record({
          at,
          kind: fc.constantFrom(...changeKinds),
          pick: fc.nat(),
          lagMs: fc.integer({ min: 0, max: 3_000 }),
        }),
        { minLength: 5, maxLength: 40, size: 'max' },
      ),
      faults: fc
        .tuple(
          focusKinds.length === 0
            ? fc.constant([])
            : fc.array(
                fc.constantFrom(...focusKinds).chain((k) => faultArb(k, replicas)),
                { minLength: 1, maxLength: 2 },
              ),
          kinds.length === 0
            ? fc.constant([])
            : fc.array(
                fc.constantFrom(...kinds).chain((k) => faultArb(k, replicas)),
                { minLength: 1, maxLength: 8, size: 'max' },
              ),
        )
        .map(([focused, others]) => [...focused, ...others]),
    }),
  );
}
