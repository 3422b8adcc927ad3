import type { Logger } from 'pino';
import type { CheckpointUpdate } from '../../core/checkpoint.js';
import type { PassType } from '../../core/domain.js';
import type { ReviewEvent } from '../../core/events.js';
import type { SnapshotEntry } from '../../core/snapshot-entry.js';
import type { DeadLetter } from '../../kafka/publisher.js';
import type { Committer } from './commit.js';
import { newDeadLetters, quarantineReject, rememberDeadLetters, type PageDeadLetters } from './dead-letters.js';
import { errorName, type DiffedPage, type ReviewChange } from './page-diff.js';
import type { PageTrace } from './run-trace.js';
import type { PipelineDeps, PipelineMetrics } from './types.js';

// A page that keeps failing is published in halves, down to single reviews, so that the review that breaks it is
// found and dead-lettered by reference while the rest is published. A review is only blamed when Kafka refused its
// record as such, or when another part of the same page went through (so Kafka and Redis work); otherwise the
// failure is taken for an outage and the pass fails as usual, losing nothing.

/** What isolating a page uses of its run and pipeline. */
export interface IsolationContext {
  epoch: number;
  type: PassType;
  committer: Pick<Committer, 'commitUnit'>;
  deps: Pick<PipelineDeps, 'snapshot' | 'metrics' | 'logger'>;
  /** Review states that broke their page: the blamed ones are added. */
  quarantined: { set(state: string, value: true): unknown };
  clock: () => number;
}

/**
 * Publishes and commits a page that keeps failing in halves, quarantining the reviews it blames (dead-lettered by
 * reference); resolves the events and dead letters it committed.
 */
export async function isolatePage(
  ctx: IsolationContext,
  diffed: DiffedPage,
  deadLetters: PageDeadLetters,
  checkpoint: CheckpointUpdate,
  trace: PageTrace,
): Promise<{ events: ReviewEvent[]; deadLetters: DeadLetter[] }> {
  const { deps, committer, epoch } = ctx;
  await committer.commitUnit(epoch, { deadLetters: deadLetters.list, states: diffed.states });
  const { published, blamed } = await bisect(diffed.changes, async (group) => {
    const events = trace.stamp(group.flatMap((c) => c.events));
    const entries = group.map((c): [number, SnapshotEntry] => [c.id, c.entry]);
    await committer.commitUnit(epoch, { events, entries }, undefined, trace.span);
    return events;
  });
  const references = blamed.map((s) => quarantineReject(s.change.id));
  const quarantineLetters = await newDeadLetters(deps.snapshot, references, ctx.type, ctx.clock);
  await committer.commitUnit(epoch, { deadLetters: quarantineLetters.list, update: checkpoint, force: true });
  quarantine(blamed, ctx.quarantined, deps);
  await rememberDeadLetters(deps.snapshot, new Set([...deadLetters.digests, ...quarantineLetters.digests]));
  return { events: published, deadLetters: [...deadLetters.list, ...quarantineLetters.list] };
}

/** A review that failed on its own, and how. */
interface Suspect {
  change: ReviewChange;
  err: unknown;
}

/** What the halving published, and the reviews it blames. */
interface Bisection {
  published: ReviewEvent[];
  blamed: Suspect[];
}

/**
 * Publishes `changes` group by group (`publish` commits one group and resolves its events), halving a group that
 * fails; throws the failure of a review it cannot blame (an outage).
 */
async function bisect(
  changes: ReviewChange[],
  publish: (group: ReviewChange[]) => Promise<ReviewEvent[]>,
): Promise<Bisection> {
  const published: ReviewEvent[] = [];
  const suspects: Suspect[] = [];
  let succeeded = 0;
  const attempt = async (group: ReviewChange[]): Promise<void> => {
    if (group.length === 0) return;
    try {
      published.push(...(await publish(group)));
      succeeded += 1;
    } catch (err) {
      if (group.length === 1) return void suspects.push({ change: group[0]!, err });
      const half = Math.ceil(group.length / 2);
      await attempt(group.slice(0, half));
      await attempt(group.slice(half));
    }
  };
  await attempt(changes);
  // A suspect gets one more try after the rest, and another as long as one of the tries goes through: a blip of
  // Kafka or Redis must not get a good review quarantined, also when it ends between two suspects' tries (the later
  // one's success is no sign that the earlier one, refused by the same blip, is to blame).
  for (let tries = suspects.splice(0); tries.length > 0;) {
    const before = succeeded;
    for (const suspect of tries) await attempt([suspect.change]);
    tries = succeeded > before ? suspects.splice(0) : [];
  }
  const blamed = suspects.filter((s) => succeeded > 0 || isRecordRefusal(s.err));
  if (blamed.length < suspects.length) throw suspects.find((s) => !blamed.includes(s))!.err;
  return { published, blamed };
}

/** Quarantines the blamed reviews' states (skipped until they change), counted and logged. */
function quarantine(
  blamed: readonly Suspect[],
  quarantined: { set(state: string, value: true): unknown },
  deps: { metrics: Pick<PipelineMetrics, 'recordsQuarantined'>; logger: Logger },
): void {
  for (const { change, err } of blamed) {
    quarantined.set(change.state, true);
    const reason = isRecordRefusal(err) ? 'record_refused' : 'isolated';
    deps.metrics.recordsQuarantined(reason);
    deps.logger.error({ id: change.id, err: errorName(err), reason }, 'review quarantined: it kept failing its page');
  }
}

// Kafka error codes that refuse one record or batch for what it is, not for the state of the cluster.
const RECORD_REFUSALS = new Set([
  'MESSAGE_TOO_LARGE',
  'RECORD_LIST_TOO_LARGE',
  'INVALID_RECORD',
  'CORRUPT_MESSAGE',
  'INVALID_TIMESTAMP',
]);

/** Whether Kafka refused a record as such (walks kafkajs's wrapped causes). */
function isRecordRefusal(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && typeof e === 'object' && depth < 8; depth++) {
    const type = (e as { type?: unknown }).type;
    if (typeof type === 'string' && RECORD_REFUSALS.has(type)) return true;
    e = (e as { originalError?: unknown; cause?: unknown }).originalError ?? (e as { cause?: unknown }).cause;
  }
  return false;
}
