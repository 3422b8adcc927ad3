import type { Logger } from 'pino';
import type { ResyncRequest } from '../core/resync-request.js';
import type { CheckpointChange } from '../core/checkpoint-change.js';
import type { LongPassRun, PassRunner, TrailingRun } from '../bridge/passes/index.js';
import type { PassSummary } from '../bridge/pipeline.js';
import type { Checkpoint } from '../redis/snapshot-store.js';
import type { FreshnessReport } from '../core/freshness-report.js';

// What only the leader of an account needs (its Kafka producers, its upstream client and the passes over them) is
// built when this replica wins the account's lease and released when it stops leading. A replica configured with
// 1,000 accounts that leads 500 of them then holds 500 Kafka connections, not 1,000, and an account it does not
// lead costs it the loop, the lease and the metrics only. A replica that wins many leases at once (at start, or
// taking over a dead replica's accounts) starts those leaderships a few at a time (StartSlots): hundreds of
// transactional producers connecting at the same moment time out together, then retry together. The leases of
// the leaderships waiting their turn stay held: their keepers renew them whatever the loop waits for.

/** Bounds how many leaderships of one process start at once; the others wait their turn, first come first served. */
export class StartSlots {
  private active = 0;
  private readonly waiting: { admit: () => void }[] = [];

  constructor(
    readonly limit: number,
    /** How often a leadership waiting for its turn tells it is alive (ms). */
    private readonly aliveEveryMs = 5_000,
  ) {
    if (!Number.isInteger(limit) || limit < 1)
      throw new RangeError(`start slots: limit ${limit} is not an integer >= 1`);
  }

  /** Leaderships starting now, and waiting for a slot (for logs and tests). */
  load(): { active: number; waiting: number } {
    return { active: this.active, waiting: this.waiting.length };
  }

  /**
   * Runs `work` in a slot once one is free; rejects without running it when `signal` aborts while it waits.
   * `alive` is called on a period while it waits: waiting for the leaderships ahead is no hang of this one (a
   * leadership that hangs in its slot stops telling its own loop it is alive).
   */
  async run<T>(work: () => Promise<T>, signal?: AbortSignal, alive?: () => void): Promise<T> {
    const timer = alive ? setInterval(alive, this.aliveEveryMs) : undefined;
    try {
      await this.take(signal);
    } finally {
      clearInterval(timer);
    }
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next.admit();
      else this.active -= 1;
    }
  }

  private take(signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    if (this.active < this.limit) {
      this.active += 1;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(signal?.reason ?? new Error('aborted'));
      };
      // A freed slot passes straight to the next waiter (active stays the same), so no newcomer can jump the queue.
      const waiter = {
        admit: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      this.waiting.push(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}

/** No bound: every leadership starts at once (a process of one account, tools). */
const UNBOUNDED = new StartSlots(Number.MAX_SAFE_INTEGER);

/** The parts of one leadership: the passes and what to close when the leadership ends. */
export interface LeaderParts<P extends PassRunner = PassRunner> {
  passes: P;
  /** Connects what the passes need (Kafka); a failure leaves nothing open (close is called). */
  connect(): Promise<void>;
  /** Closes the connections of the leadership (after its page in flight settled). */
  close(): Promise<void>;
}

/** A PassRunner that builds its leader's parts on first use and drops them on release(). */
export class LazyPasses<P extends PassRunner = PassRunner> implements PassRunner {
  private parts: LeaderParts<P> | null = null;
  private acquiring: Promise<LeaderParts<P>> | null = null;

  constructor(
    private readonly build: () => LeaderParts<P>,
    private readonly logger: Logger,
    private readonly slots: StartSlots = UNBOUNDED,
  ) {}

  /** The passes of the current leadership, or null when this replica holds none. */
  current(): P | null {
    return this.parts?.passes ?? null;
  }

  private async acquire(): Promise<P> {
    if (this.parts) return this.parts.passes;
    this.acquiring ??= (async () => {
      const parts = this.build();
      try {
        await parts.connect();
      } catch (err) {
        await parts.close().catch(() => undefined);
        throw err;
      }
      this.parts = parts;
      return parts;
    })().finally(() => (this.acquiring = null));
    return (await this.acquiring).passes;
  }

  /** Lets the page in flight finish, then closes the leadership's connections; a no-op when none is held. */
  async release(): Promise<void> {
    const parts = this.parts;
    if (!parts) return;
    this.parts = null;
    await parts.passes.settle().catch((err: unknown) => this.logger.warn({ err }, 'the last page did not settle'));
    await parts.close().catch((err: unknown) => this.logger.warn({ err }, 'closing the leadership failed'));
  }

  /**
   * Starts the leadership in its turn (StartSlots): connects its parts, takes the transactional id, brings Redis up
   * to the changelog. The loop calls it before any pass of a new epoch, so every leadership's connections open here.
   */
  async prepare(epoch: number, signal: AbortSignal, force?: boolean, alive?: () => void): Promise<boolean> {
    return this.slots.run(async () => (await this.acquire()).prepare(epoch, signal, force, alive), signal, alive);
  }

  async takeRestoreRequest(): Promise<boolean> {
    return (await this.acquire()).takeRestoreRequest();
  }

  async checkpoint(): Promise<Checkpoint> {
    return (await this.acquire()).checkpoint();
  }

  async takeSweepRequest(): Promise<boolean> {
    return (await this.acquire()).takeSweepRequest();
  }

  async incremental(epoch: number, signal: AbortSignal): Promise<PassSummary> {
    return (await this.acquire()).incremental(epoch, signal);
  }

  trailingDueAt(open?: ReadonlySet<number>): number | null {
    return this.parts?.passes.trailingDueAt?.(open) ?? null;
  }

  trailingTurn(open: ReadonlySet<number>): number | null | undefined {
    const passes = this.parts?.passes;
    if (!passes) return null;
    return passes.trailingTurn ? passes.trailingTurn(open) : undefined;
  }

  async openTrailing(
    epoch: number,
    signal: AbortSignal,
    tier?: number,
    open?: ReadonlySet<number>,
  ): Promise<TrailingRun | null> {
    return (await (await this.acquire()).openTrailing?.(epoch, signal, tier, open)) ?? null;
  }

  freshness(): FreshnessReport | null {
    return this.parts?.passes.freshness?.() ?? null;
  }

  async openFullScan(epoch: number, signal: AbortSignal): Promise<LongPassRun> {
    return (await this.acquire()).openFullScan(epoch, signal);
  }

  async settle(): Promise<void> {
    await this.parts?.passes.settle();
  }

  async takeResync(): Promise<ResyncRequest | null> {
    return (await this.acquire()).takeResync();
  }

  async openResync(epoch: number, signal: AbortSignal, request: ResyncRequest): Promise<LongPassRun> {
    return (await this.acquire()).openResync(epoch, signal, request);
  }

  async requeueResync(request: ResyncRequest): Promise<void> {
    return (await this.acquire()).requeueResync(request);
  }

  async pausedSince(): Promise<number | null> {
    return (await this.acquire()).pausedSince();
  }

  async heartbeat(epoch: number, paused: boolean): Promise<void> {
    return (await this.acquire()).heartbeat(epoch, paused);
  }

  async applyCheckpointChange(epoch: number): Promise<CheckpointChange | null> {
    return (await (await this.acquire()).applyCheckpointChange?.(epoch)) ?? null;
  }
}
