import type { Logger } from 'pino';
import { Gauge, Registry } from 'prom-client';
import {
  DEPENDENCY_REASONS,
  dependencyOf,
  dependencyReport,
  failureReason,
  nextDependencyState,
  type DependencyName,
  type DependencyReport,
  type DependencyState,
} from '../core/dependency-health.js';

// Watches the process's dependencies on their own schedule, so that /readyz answers from what is known (never waits
// on a hanging broker) and a failure is logged once when it starts (warn, naming the settings to check) and once
// when it ends (info), whatever the libraries retry underneath. Each dependency is a check registered by name: the
// app registers kafka, redis and upstream; another module registers its own (a schema registry:
// `monitor.register('schema_registry', () => client.ping())`) and appears in /readyz, `status` and the gauge alike.

/** A registered check. */
export interface DependencyCheck {
  /** Resolves when the dependency answers as it should; rejects with the failure otherwise. */
  check: () => Promise<void>;
  /** Whether a failure takes the process out of readiness (default true). */
  gatesReadiness?: boolean;
  /** How often it runs while ok (default: the monitor's interval); failing checks run at the monitor's interval. */
  intervalMs?: number;
  /** What the warning adds (the accounts whose upstream refused them); never a secret. */
  detail?: () => Record<string, unknown>;
  /** What explains a vague failure (a timeout, retries spent) better: the client's last connection error, if any. */
  lastError?: () => unknown;
  /** The address settings in use (REDIS_URL, or the Sentinels, or the Cluster nodes); default: every one. */
  address?: readonly string[];
}

/** Options of {@link DependencyMonitor}. */
export interface DependencyMonitorOptions {
  logger: Logger;
  /** How often the checks run (default 5 s). */
  intervalMs?: number;
  /** A check slower than this fails as `timeout` (default 4 s). */
  timeoutMs?: number;
  now?: () => number;
  /** Called after every round with the reports (the app publishes them to Redis for `status`). */
  onRound?: (reports: Record<string, DependencyReport>) => Promise<void>;
}

class CheckTimeout extends Error {
  constructor(ms: number) {
    super(`no answer within ${ms} ms`);
    this.name = 'CheckTimeout';
  }
}

/** The process's dependencies, checked periodically and on demand; one log line per change of state. */
export class DependencyMonitor {
  /** Holds reviews_bridge_dependency_failing; merged into the process's /metrics. */
  readonly registry = new Registry();
  private readonly checks = new Map<string, DependencyCheck>();
  private readonly states = new Map<string, DependencyState>();
  private readonly running = new Map<string, Promise<DependencyState>>();
  private readonly lastRun = new Map<string, number>();
  private readonly gauge: Gauge;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly options: DependencyMonitorOptions) {
    this.now = options.now ?? Date.now;
    this.gauge = new Gauge({
      name: 'reviews_bridge_dependency_failing',
      help:
        '1 while a dependency (kafka, redis, upstream, ...) fails, labelled with the reason (unreachable, ' +
        'auth_failed, tls, timeout, oom, readonly, forbidden, misconfigured, error); 0 under reason "none" while ok.',
      labelNames: ['dependency', 'reason'],
      registers: [this.registry],
    });
  }

  /** Adds a dependency to watch (checked from the next round on, or at once by check()). */
  register(name: DependencyName, check: DependencyCheck): void {
    this.checks.set(name, check);
  }

  /** Runs a first round now and then one every interval. */
  start(): void {
    if (this.timer) return;
    void this.round();
    this.timer = setInterval(() => void this.round(), this.options.intervalMs ?? 5_000);
    this.timer.unref();
  }

  /** Stops the rounds. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Runs one dependency's check now (concurrent callers share it) and resolves its state. */
  check(name: DependencyName): Promise<DependencyState | undefined> {
    const spec = this.checks.get(name);
    if (!spec) return Promise.resolve(this.states.get(name));
    let pending = this.running.get(name);
    if (!pending) {
      const timeoutMs = this.options.timeoutMs ?? 4_000;
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new CheckTimeout(timeoutMs)), timeoutMs);
      });
      pending = Promise.race([Promise.resolve().then(spec.check), timeout])
        .then(
          () => this.observe(name, null),
          (err: unknown) => this.observe(name, explained(err, spec.lastError?.())),
        )
        .finally(() => {
          clearTimeout(timer);
          this.running.delete(name);
          this.lastRun.set(name, this.now());
        });
      this.running.set(name, pending);
    }
    return pending;
  }

  /**
   * Records what a check (or any call to the dependency) found: null when it answered, else its failure. Logs a
   * change of state once and updates the gauge; resolves the state.
   */
  observe(name: DependencyName, failure: unknown): DependencyState {
    const previous = this.states.get(name);
    const reason = failure === null ? null : { reason: failureReason(failure) };
    const { state, change } = nextDependencyState(name, previous, reason, this.now(), this.checks.get(name)?.address);
    this.states.set(name, state);
    this.setGauge(name, state);
    const { logger } = this.options;
    if (change === 'failing' && state.status === 'failing') {
      const sinceIso = new Date(state.since).toISOString();
      const detail = this.checks.get(name)?.detail?.() ?? {};
      logger.warn(
        {
          dependency: name,
          reason: state.reason,
          since: sinceIso,
          check: state.settings,
          cause: causeLine(failure),
          ...detail,
        },
        `${name} ${state.reason}: check ${state.settings.join(', ')} (retrying; logged again when it changes)`,
      );
    } else if (change === 'recovered' && previous?.status === 'failing') {
      logger.info(
        { dependency: name, failingSince: new Date(previous.since).toISOString(), reason: previous.reason },
        `${name} ok again`,
      );
    }
    return state;
  }

  /**
   * Whether a pass's failure is a failing dependency's (then the caller logs it at debug: the monitor has said it
   * once). The dependency is checked now unless it was a moment ago; an error of no registered dependency is not.
   */
  async explains(err: unknown): Promise<boolean> {
    const name = dependencyOf(err);
    if (name === null || !this.checks.has(name)) return false;
    const recent = this.now() - (this.lastRun.get(name) ?? -Infinity) < 1_000;
    const state = recent ? this.states.get(name) : await this.check(name);
    return state?.status === 'failing';
  }

  /** Whether every dependency that gates readiness is known to be ok. */
  ready(): boolean {
    for (const [name, spec] of this.checks) {
      if (spec.gatesReadiness === false) continue;
      if (this.states.get(name)?.status !== 'ok') return false;
    }
    return true;
  }

  /** The state of one dependency (undefined until first checked). */
  state(name: DependencyName): DependencyState | undefined {
    return this.states.get(name);
  }

  /** Every registered dependency as /readyz and `status` show it ('unknown' until first checked). */
  reports(): Record<string, DependencyReport> {
    const out: Record<string, DependencyReport> = {};
    for (const name of this.checks.keys()) {
      const state = this.states.get(name);
      out[name] = state ? dependencyReport(state) : { status: 'unknown' };
    }
    return out;
  }

  private async round(): Promise<void> {
    const now = this.now();
    const base = this.options.intervalMs ?? 5_000;
    await Promise.all(
      [...this.checks].map(([name, spec]) => {
        const every = this.states.get(name)?.status === 'ok' ? (spec.intervalMs ?? base) : base;
        // Half an interval of slack: a round that came a little early must not skip a check for a whole interval.
        if (now - (this.lastRun.get(name) ?? -Infinity) < every - base / 2) return undefined;
        return this.check(name);
      }),
    );
    await this.options.onRound?.(this.reports()).catch(() => undefined);
  }

  private setGauge(name: string, state: DependencyState): void {
    for (const reason of [...DEPENDENCY_REASONS, 'none']) this.gauge.remove({ dependency: name, reason });
    if (state.status === 'ok') this.gauge.set({ dependency: name, reason: 'none' }, 0);
    else this.gauge.set({ dependency: name, reason: state.reason }, 1);
  }
}

/**
 * The failure to report: a vague one (a timeout, a client that gave up retrying) is explained by the connection's
 * last error when there is one (refused, authentication, TLS).
 */
function explained(err: unknown, last: unknown): unknown {
  if (last === undefined || last === null) return err;
  const vague = err instanceof CheckTimeout || ['error', 'timeout', 'unreachable'].includes(failureReason(err));
  return vague && failureReason(last) !== 'error' ? last : err;
}

/** One line of what the library said (no stack), without a value that could be a secret: its first message. */
function causeLine(failure: unknown): string | undefined {
  if (failure === null || typeof failure !== 'object') return undefined;
  const message = (failure as { message?: unknown }).message;
  return typeof message === 'string' ? message.split('\n')[0]!.slice(0, 200) : undefined;
}
