import type { Logger } from 'pino';
import type { ResyncRequest } from '../core/resync-request.js';
import type { FullScanRun, PassRunner } from '../bridge/passes/index.js';
import type { PassSummary } from '../bridge/pipeline.js';
import type { Checkpoint } from '../redis/snapshot-store.js';

// What only the leader of an account needs (its Kafka producers, its upstream client and the passes over them) is
// built when this replica wins the account's lease and released when it stops leading. A replica configured with
// 1,000 accounts that leads 500 of them then holds 500 Kafka connections, not 1,000, and an account it does not
// lead costs it the loop, the lease and the metrics only.

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

  async prepare(epoch: number, signal: AbortSignal, force?: boolean): Promise<boolean> {
    return (await this.acquire()).prepare(epoch, signal, force);
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

  async openFullScan(epoch: number, signal: AbortSignal): Promise<FullScanRun> {
    return (await this.acquire()).openFullScan(epoch, signal);
  }

  async settle(): Promise<void> {
    await this.parts?.passes.settle();
  }

  async takeResync(): Promise<ResyncRequest | null> {
    return (await this.acquire()).takeResync();
  }

  async openResync(epoch: number, signal: AbortSignal, request: ResyncRequest): Promise<FullScanRun> {
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
}
