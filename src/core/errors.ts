// The bridge's one error model, after kafkajs's (KafkaJSError carries `retriable`, subclasses say what happened):
// every failure the bridge raises on purpose is a BridgeError with a `kind` (what happened, a bounded word the
// orchestration and the metrics can act on) and `retriable` (whether trying the same thing again could succeed).
// Adapters (upstream, Kafka, Redis) throw these classes; the orchestration (src/bridge) decides on `kind` and
// `retriable` through kindOf/isRetriable and never imports an adapter's class. Messages are built from our own
// words: they end up in logs and must never carry a secret, a token or an e-mail address.

/**
 * What went wrong upstream (the reviews listing and its token endpoint).
 * `not_ready`: 202 Accepted, the answer is not ready yet (retried after Retry-After or a backoff).
 * `cursor_invalid`: the listing refused a cursor (400 even for a page of one): the pass must restart without it.
 * `account`: 402, the account needs a second factor (2FA) the bridge cannot give; not retried.
 * `config`: 404, no listing at the configured address (UPSTREAM_BASE_URL); not retried.
 * `too_large`: the page cannot be served, even as a page of one (over the body cap, or 400 for size).
 */
export type UpstreamErrorKind =
  | 'throttled'
  | 'server'
  | 'network'
  | 'body'
  | 'auth'
  | 'scope'
  | 'client'
  | 'cursor_loop'
  | 'too_large'
  | 'not_ready'
  | 'cursor_invalid'
  | 'account'
  | 'config';

/**
 * What went wrong in the bridge's own state or its stores.
 * `fenced`: another replica holds the account now (Redis epoch or Kafka transactional id): commit nothing more.
 * `snapshot_lost`: the account's keys vanished from Redis under a running leader: restore from the changelog.
 * `replication`: a Redis write was not acknowledged by the replicas asked for (WAIT came back short).
 * `commit_unknown`: a Kafka transaction was asked to commit and no answer came (timeout, lost connection): it may
 *   have landed, so the leadership is readied again (fence, apply the changelog's tail) before anything is derived.
 * `cursor_format`: an upstream cursor value cannot be used as one (a link without a cursor parameter).
 * `closed`: a component was closed while a caller waited on it (shutdown).
 * `setting`: an invalid or missing setting (configuration, field policy, secret file).
 * `usage`: bad arguments of a command.
 */
export type BridgeFaultKind =
  'fenced' | 'snapshot_lost' | 'replication' | 'commit_unknown' | 'cursor_format' | 'closed' | 'setting' | 'usage';

/** Every kind of failure the bridge tells apart. */
export type ErrorKind = UpstreamErrorKind | BridgeFaultKind;

/** Options of a BridgeError. */
export interface BridgeErrorOptions {
  /** Whether another attempt could succeed; defaults to the kind's (RETRIABLE_KINDS). */
  retriable?: boolean;
  cause?: unknown;
}

/** Kinds after which the same work, tried again, can succeed without anyone changing anything. */
const RETRIABLE_KINDS: ReadonlySet<ErrorKind> = new Set<ErrorKind>([
  'throttled',
  'server',
  'network',
  'body',
  'not_ready',
  'snapshot_lost',
  'replication',
  'commit_unknown',
]);

/** The base of every error the bridge raises on purpose: `kind` says what happened, `retriable` what to do. */
export class BridgeError extends Error {
  readonly kind: ErrorKind;
  readonly retriable: boolean;

  constructor(kind: ErrorKind, message: string, options: BridgeErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'BridgeError';
    this.kind = kind;
    this.retriable = options.retriable ?? RETRIABLE_KINDS.has(kind);
  }
}

/** Thrown when a commit is refused because another replica has taken the lease since (Redis or Kafka fenced it). */
export class FencedError extends BridgeError {
  constructor(message: string) {
    super('fenced', message);
    this.name = 'FencedError';
  }
}

/**
 * Thrown when the account's keys vanished from Redis under a running leader (a flush, a restart without
 * persistence, a failover to an empty replica): the leader stops and restores the snapshot from Kafka.
 */
export class SnapshotLostError extends BridgeError {
  /**
   * @param full Some of the account's keys vanished and others stayed (eviction, a key deleted by hand): only a
   *   restore from the changelog's beginning brings them back, a tail since Redis's checkpoint would not.
   */
  constructor(
    message: string,
    readonly full = false,
    /**
     * Set when Redis keeps evicting the snapshot (a restore did not hold): the wait before the next restore, and
     * the log line was said already (src/core/snapshot-hold.ts).
     */
    readonly evictingRetryMs: number | null = null,
  ) {
    super('snapshot_lost', message);
    this.name = 'SnapshotLostError';
  }
}

/** A write (or the state it read) was not acknowledged by enough replicas: a failover could still undo it. */
export class ReplicationError extends BridgeError {
  constructor(wanted: number, acknowledged: number, timeoutMs: number) {
    super(
      'replication',
      `write acknowledged by ${acknowledged} of ${wanted} required replica(s) within ${timeoutMs} ms`,
    );
    this.name = 'ReplicationError';
  }
}

/**
 * Thrown when a Kafka transaction's commit was sent but its outcome is unknown (no answer before the watchdog, a
 * connection lost mid-request): the broker may have committed it. Deriving the page again would publish its events
 * a second time, or, if the upstream moved meanwhile, other events under the same ids; so the leader fences its
 * producer and applies the changelog's tail first, as a new leader does (src/bridge/restore.ts).
 */
export class CommitOutcomeUnknownError extends BridgeError {
  constructor(message: string, cause?: unknown) {
    super('commit_unknown', message, { cause });
    this.name = 'CommitOutcomeUnknownError';
  }
}

/** Which upstream endpoint a request went to. */
export type Endpoint = 'token' | 'reviews';

/** Details carried by an UpstreamError (all optional except the kind). */
export interface UpstreamErrorDetails {
  endpoint?: Endpoint;
  /** Last HTTP status seen (0 or absent for connection errors). */
  status?: number;
  /** Requests made for this operation, retries included. */
  attempts?: number;
  /** Short bounded label of the cause ('status_503', 'timeout', 'truncated', ...), used as a metric label. */
  reason?: string;
  /** Set once an operation has given up: an enclosing retry loop must not start over. */
  final?: boolean;
  /** How long the server asked us to wait before the next attempt (Retry-After of a 202), in seconds. */
  retryAfterSeconds?: number | null;
  cause?: unknown;
}

/** The typed failure of the upstream client: `kind` says what happened, the message says it to a human. */
export class UpstreamError extends BridgeError {
  declare readonly kind: UpstreamErrorKind;
  readonly endpoint: Endpoint | undefined;
  readonly status: number | undefined;
  readonly attempts: number | undefined;
  readonly reason: string | undefined;
  readonly final: boolean;
  readonly retryAfterSeconds: number | null;

  constructor(kind: UpstreamErrorKind, message: string, details: UpstreamErrorDetails = {}) {
    // A final error has spent its retries: an enclosing loop must not start over.
    super(kind, message, { cause: details.cause, retriable: details.final ? false : undefined });
    this.name = 'UpstreamError';
    this.endpoint = details.endpoint;
    this.status = details.status;
    this.attempts = details.attempts;
    this.reason = details.reason;
    this.final = details.final ?? false;
    this.retryAfterSeconds = details.retryAfterSeconds ?? null;
  }

  /** The upstream client's older name of `retriable`. */
  get retryable(): boolean {
    return this.retriable;
  }
}

/** Why a cursor value could not be used (a link without a cursor parameter, an object where a string belongs). */
export class CursorFormatError extends BridgeError {
  constructor(message: string) {
    super('cursor_format', message);
    this.name = 'CursorFormatError';
  }
}

/** Error with which pending acquisitions fail when the rate limiter is closed. */
export class LimiterClosedError extends BridgeError {
  constructor() {
    super('closed', 'rate limiter closed');
    this.name = 'LimiterClosedError';
  }
}

/** One bad setting: its name and what is wrong with it (never its value). */
export interface ConfigProblem {
  setting: string;
  problem: string;
}

/**
 * Thrown for invalid or missing settings; the message names each variable, one line per problem (a start reports
 * every bad setting at once), and never echoes a value. `setting` is the first problem's.
 */
export class ConfigError extends BridgeError {
  readonly setting: string;
  readonly problems: readonly ConfigProblem[];

  constructor(setting: string | readonly ConfigProblem[], problem = '') {
    const problems = typeof setting === 'string' ? [{ setting, problem }] : setting;
    super('setting', problems.map((p) => `invalid configuration: ${p.setting}: ${p.problem}`).join('\n'));
    this.name = 'ConfigError';
    this.setting = problems[0]?.setting ?? 'environment';
    this.problems = problems;
  }
}

/** A bad field policy setting; `setting` names the variable (the config turns it into a ConfigError). */
export class FieldPolicySpecError extends BridgeError {
  constructor(
    readonly setting: string,
    problem: string,
  ) {
    super('setting', problem);
    this.name = 'FieldPolicySpecError';
  }
}

/** Why a secret could not be read; the message names the source (a path or variable), never a value. */
export class SecretError extends BridgeError {
  constructor(message: string) {
    super('setting', message);
    this.name = 'SecretError';
  }
}

/** Bad arguments of a command: the message says what is wrong and what is expected. */
export class UsageError extends BridgeError {
  constructor(message: string) {
    super('usage', message);
    this.name = 'UsageError';
  }
}

/** The kind of a failure: a BridgeError's own, or 'other' for anything else (a library's or a runtime error). */
export function kindOf(err: unknown): ErrorKind | 'other' {
  return err instanceof BridgeError ? err.kind : 'other';
}

/** True when `err` is a BridgeError of one of the given kinds. */
export function hasKind(err: unknown, ...kinds: ErrorKind[]): boolean {
  return err instanceof BridgeError && kinds.includes(err.kind);
}

/**
 * Whether trying again could succeed: a BridgeError's flag; for another error its own boolean `retriable` when it
 * has one (kafkajs's errors, whose convention this model follows); otherwise true, because an unknown failure of a
 * pass is retried with backoff rather than stopping the bridge.
 */
export function isRetriable(err: unknown): boolean {
  if (err instanceof BridgeError) return err.retriable;
  const flag = err !== null && typeof err === 'object' ? (err as { retriable?: unknown }).retriable : undefined;
  return typeof flag === 'boolean' ? flag : true;
}
