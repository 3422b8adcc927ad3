import { createHash } from 'node:crypto';
import type { Scheduler } from 'fast-check';
import { VirtualClock } from './clock.js';

// The simulated world's core: the virtual clock, fast-check's scheduler, and the processes (replicas) whose every
// call into the world (a Redis command, a Kafka request, an upstream page) is one scheduled step. The scheduler
// decides in which order the steps of all replicas are answered; a step is where a process can crash (before or
// after its effect), freeze, or get an answer that is lost. A crashed process's steps never answer again: its
// promises hang, as a killed process's would, and its timers never fire.

/** A process of the world (a bridge replica). */
export class Actor {
  crashed = false;
  /** Steps are held until this virtual time (a freeze: a GC pause, a stopped container). */
  frozenUntil = 0;
  /** Steps taken so far (a crash plan counts them). */
  steps = 0;
  /** A crash armed at a step: before or after the step's effect. */
  crashAt: { step: number; after: boolean } | null = null;

  constructor(readonly name: string) {}
}

/** One line of a schedule's trace (printed when it fails). */
export interface TraceLine {
  at: number;
  what: string;
}

const NEVER = new Promise<never>(() => undefined);

/** The world's clock and scheduler, and the step every simulated call goes through. */
export class World {
  readonly trace: TraceLine[] = [];
  /** A digest of every trace line ever noted (the kept trace is only the last ones): for the replay test. */
  private readonly traceHash = createHash('sha256');
  /** Set by the driver once the schedule is over: late steps of frozen or abandoned work do nothing. */
  over = false;
  /**
   * The kafka-only-fence class: a freeze holds a Kafka InitProducerId in flight (sent after the pause, it fences the
   * leader that took over meanwhile at the broker alone: issue 36's "fenced by Kafka alone"), and a replica that no
   * longer holds the lease may still take the transactional id. Off, the request goes out before a freeze, and
   * reaches the broker only from the lease's holder.
   */
  freezeHoldsInit = true;

  constructor(
    readonly clock: VirtualClock,
    readonly scheduler: Scheduler,
    readonly start: number,
    /** The virtual time a step of this label takes (a round trip), drawn from the schedule's seed. */
    private readonly latency: (label: string) => number = () => 0,
    private readonly traceLimit = 400,
  ) {}

  /** Records a line of the schedule's trace (faults, crashes, restarts; the last ones are kept). */
  note(what: string): void {
    this.trace.push({ at: this.clock.now() - this.start, what });
    this.traceHash.update(`${this.clock.now() - this.start} ${what}\n`);
    if (this.trace.length > this.traceLimit * 2) this.trace.splice(0, this.trace.length - this.traceLimit);
  }

  /** The digest of the whole trace so far (hex). */
  traceDigest(): string {
    return this.traceHash.copy().digest('hex');
  }

  /**
   * One step of `actor`: waits out a freeze, lets the scheduler pick when it is answered, then applies `effect`
   * (unless the actor crashes there). `effect` may throw: the caller gets that error as the answer. `before` runs
   * once the step is due, before its effect and before a freeze is waited out (a fault may freeze the actor there).
   */
  async step<T>(actor: Actor, label: string, effect: () => T, before?: () => void): Promise<T> {
    if (actor.crashed) return NEVER;
    // The round trip takes time: a sweep's pages take seconds, so polls fall due between them as in production.
    const ms = this.latency(label);
    if (ms > 0) await this.clock.sleep(ms);
    const holds = this.freezeHoldsInit || label !== 'kafka init';
    while (holds && this.clock.now() < actor.frozenUntil) await this.clock.sleep(actor.frozenUntil - this.clock.now());
    await this.scheduler.schedule(Promise.resolve(), `${actor.name} ${label}`);
    if (actor.crashed || this.over) return NEVER;
    before?.();
    while (holds && this.clock.now() < actor.frozenUntil) await this.clock.sleep(actor.frozenUntil - this.clock.now());
    if (actor.crashed) return NEVER;
    actor.steps += 1;
    const crash = actor.crashAt !== null && actor.steps >= actor.crashAt.step ? actor.crashAt : null;
    if (crash && !crash.after) {
      this.crash(actor, `before ${label}`);
      return NEVER;
    }
    const result = effect();
    if (crash) {
      this.crash(actor, `after ${label}`);
      return NEVER;
    }
    return result;
  }

  /** A step that always runs (the world's own work, no process involved): scheduled, never crashed. */
  async settle(label: string): Promise<void> {
    await this.scheduler.schedule(Promise.resolve(), label);
  }

  /** Kills a process where it stands. */
  crash(actor: Actor, where: string): void {
    if (actor.crashed) return;
    actor.crashed = true;
    this.note(`${actor.name} crashed ${where}`);
  }

  /** The actor's sleep: never wakes a crashed process. */
  sleeper(actor: Actor): (ms: number, signal?: AbortSignal) => Promise<void> {
    return async (ms, signal) => {
      if (actor.crashed) return NEVER;
      await this.clock.sleep(ms, signal);
      if (actor.crashed) return NEVER;
    };
  }
}
