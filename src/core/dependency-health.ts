import { z } from 'zod';

// The health of what the bridge depends on, as data: each dependency (Kafka, Redis, the upstream, and any other a
// module registers, such as a schema registry) is ok or failing for a bounded reason since a moment, and each
// reason names the settings an operator checks. /readyz, `status`, the log and a gauge all say the same thing, and a
// library's own retries (kafkajs logs every reconnect attempt, ioredis emits an error per reconnect) fold into one
// line per change of state. Classification works on an error's shape (name, code, message), never its class: the
// libraries' classes stay in their adapters.

/** The dependencies the bridge checks itself; others (a schema registry) register under their own name. */
export type DependencyName = 'kafka' | 'redis' | 'upstream' | 'schema_registry' | (string & {});

/**
 * Every reason a dependency fails for, as a bounded word (also a metric label).
 * `unreachable`: no connection (refused, no route, unknown host). `auth_failed`: credentials refused.
 * `tls`: the TLS handshake failed (certificate, CA, protocol). `timeout`: no answer in time.
 * `oom`: Redis refuses writes at maxmemory (noeviction). `readonly`: a read-only Redis replica (or a full disk).
 * `evicting`: Redis evicts an account's snapshot faster than a restore holds it (maxmemory too small under an
 * evicting policy): the account publishes nothing meanwhile.
 * `forbidden`: authenticated but not allowed (ACL, scope). `misconfigured`: answers, but not as configured (no
 * listing at the URL, a wrong cluster). `error`: any other failure.
 */
export const DEPENDENCY_REASONS = [
  'unreachable',
  'auth_failed',
  'tls',
  'timeout',
  'oom',
  'evicting',
  'readonly',
  'forbidden',
  'misconfigured',
  'error',
] as const;

/** Why a dependency fails (one of DEPENDENCY_REASONS). */
export type DependencyReason = (typeof DEPENDENCY_REASONS)[number];

/** What is known of one dependency: ok, or failing for `reason`; both since the check that first saw it so. */
export type DependencyState =
  { status: 'ok'; since: number } | { status: 'failing'; reason: DependencyReason; since: number; settings: string[] };

/** A dependency's failure as an operator reads it in /readyz and `status`. */
export interface DependencyReport {
  /** unknown: not checked yet. */
  status: 'ok' | 'failing' | 'unknown';
  /** ISO 8601: when the dependency entered this state (absent while unknown). */
  since?: string;
  reason?: DependencyReason;
  /** The settings to check (names only, never values). */
  settings?: string[];
}

/** One dependency as /readyz, `status` and the admin API show it (DependencyReport). */
export const DependencyReportSchema = z.object({
  status: z.enum(['ok', 'failing', 'unknown']).describe('unknown: not checked yet'),
  since: z.string().optional().describe('ISO 8601: when the dependency entered this state'),
  reason: z.enum(DEPENDENCY_REASONS).optional(),
  settings: z.array(z.string()).optional().describe('the settings to check (names only, never values)'),
});

/** The settings an operator checks for a dependency failing for a reason (beyond the address, always named). */
const SETTINGS: Record<string, { address: string[]; auth: string[]; tls: string[] }> = {
  kafka: {
    address: ['KAFKA_BROKERS'],
    auth: ['KAFKA_SASL_MECHANISM', 'KAFKA_SASL_USERNAME', 'KAFKA_SASL_PASSWORD_FILE'],
    tls: ['KAFKA_SSL', 'KAFKA_SSL_CA_FILE', 'KAFKA_SSL_CERT_FILE', 'KAFKA_SSL_KEY_FILE'],
  },
  redis: {
    address: ['REDIS_URL', 'REDIS_SENTINELS', 'REDIS_CLUSTER_NODES'],
    auth: ['REDIS_USERNAME', 'REDIS_PASSWORD_FILE'],
    tls: ['REDIS_TLS', 'REDIS_TLS_CA_FILE', 'REDIS_TLS_CERT_FILE', 'REDIS_TLS_KEY_FILE'],
  },
  upstream: {
    address: ['UPSTREAM_BASE_URL'],
    auth: ['UPSTREAM_CLIENT_ID_FILE', 'UPSTREAM_CLIENT_SECRET_FILE'],
    tls: ['UPSTREAM_CA_FILE'],
  },
  schema_registry: { address: ['SCHEMA_REGISTRY_URL'], auth: [], tls: [] },
};

/** Redis's address settings that a configuration of `kind` uses (the others are not set, and are not named). */
export function redisAddressSettings(kind: 'standalone' | 'sentinel' | 'cluster'): string[] {
  if (kind === 'sentinel') return ['REDIS_SENTINELS', 'REDIS_SENTINEL_NAME'];
  return kind === 'cluster' ? ['REDIS_CLUSTER_NODES'] : ['REDIS_URL'];
}

/**
 * The settings to check when `dependency` fails for `reason` (names only); `address`: the address settings in use,
 * when the dependency can be addressed several ways (Redis: a URL, Sentinels or Cluster nodes).
 */
export function settingsToCheck(
  dependency: DependencyName,
  reason: DependencyReason,
  address?: readonly string[],
): string[] {
  const known = SETTINGS[dependency];
  if (!known) return [];
  const s = address ? { ...known, address: [...address] } : known;
  switch (reason) {
    case 'auth_failed':
    case 'forbidden':
      return [...s.auth, ...s.address.slice(0, 1)];
    case 'tls':
      return [...s.tls, ...s.address.slice(0, 1)];
    case 'oom':
      // Not a setting of the bridge: the Redis server's maxmemory (and its eviction policy) is what to raise.
      return ['maxmemory (Redis server)', ...s.address];
    case 'evicting':
      return ['maxmemory (Redis server)', 'maxmemory-policy (Redis server)', ...s.address];
    case 'readonly':
      // A replica named as the primary, or a server that refuses writes after a failed save (a full disk).
      return [...s.address, 'role and disk (Redis server)'];
    default:
      return s.address;
  }
}

const TLS_CODES = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|EPROTO$|HOSTNAME_MISMATCH)/;
const UNREACHABLE_CODES = /^(ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|ECONNRESET|EAI_AGAIN|EPIPE)$/;

/** The error and its causes (cause, originalError, errors of an AggregateError), outermost first, a few deep. */
function chain(err: unknown): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  const queue: unknown[] = [err];
  while (queue.length > 0 && out.length < 8) {
    const e = queue.shift();
    if (e === null || typeof e !== 'object') continue;
    const o = e as Record<string, unknown>;
    out.push(o);
    queue.push(o.cause, o.originalError, o.lastError);
    if (Array.isArray(o.errors)) queue.push(...(o.errors as unknown[]).slice(0, 3));
  }
  return out;
}

/** Why a dependency's call failed, from the error's shape (name, code, message of it and its causes). */
export function failureReason(err: unknown): DependencyReason {
  const links = chain(err);
  const text = links.map((l) => `${String(l.name ?? '')} ${String(l.message ?? '')}`).join(' | ');
  const codes = links.map((l) => String(l.code ?? ''));
  // Redis's own refusals come first: they are precise.
  if (/\bOOM command not allowed/.test(text)) return 'oom';
  if (links.some((l) => l.name === 'SnapshotEvictingError')) return 'evicting';
  if (/\bREADONLY\b|\bMISCONF\b/.test(text)) return 'readonly';
  if (/\bWRONGPASS\b|\bNOAUTH\b|invalid username-password|SASLAuthentication|SASL Authentication failed/i.test(text))
    return 'auth_failed';
  if (/\bNOPERM\b|TopicAuthorizationFailed|ClusterAuthorizationFailed|TransactionalIdAuthorizationFailed/.test(text))
    return 'forbidden';
  if (links.some((l) => l.kind === 'auth')) return 'auth_failed';
  if (links.some((l) => l.kind === 'scope')) return 'forbidden';
  if (links.some((l) => l.kind === 'config')) return 'misconfigured';
  if (codes.some((c) => TLS_CODES.test(c)) || /certificate|\bSSL\b|\bTLS\b|handshake/i.test(text)) return 'tls';
  if (codes.some((c) => UNREACHABLE_CODES.test(c)) || /ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ENETUNREACH/.test(text))
    return 'unreachable';
  if (links.some((l) => l.kind === 'network')) return 'unreachable';
  if (codes.includes('ETIMEDOUT') || /timed? ?out|timeout/i.test(text)) return 'timeout';
  if (
    /Connection is closed|connection (error|closed)|Failed to connect|KafkaJSConnection|max retries per request/i.test(
      text,
    )
  )
    return 'unreachable';
  return 'error';
}

/**
 * Which dependency an error of a pass or of the lease came from, by its shape: kafkajs's errors (KafkaJS*), the
 * upstream client's (UpstreamError of a kind the operator fixes or waits out), Redis's replies and connection
 * errors. Null for the bridge's own failures (fenced, a lost snapshot...) and anything else.
 */
export function dependencyOf(err: unknown): DependencyName | null {
  const links = chain(err);
  const outer = links[0];
  if (!outer) return null;
  if (outer.name === 'UpstreamError')
    return ['network', 'auth', 'scope', 'config', 'server'].includes(String(outer.kind)) ? 'upstream' : null;
  // The bridge's own failures (fenced, commit outcome unknown, a lost snapshot...) are not a dependency's.
  if (typeof outer.kind === 'string') return null;
  const names = links.map((l) => String(l.name ?? ''));
  if (names.some((n) => n.startsWith('KafkaJS'))) return 'kafka';
  if (names.includes('ReplyError') || names.includes('MaxRetriesPerRequestError')) return 'redis';
  const text = links.map((l) => String(l.message ?? '')).join('\n');
  if (
    /^(OOM|READONLY|MISCONF|NOAUTH|WRONGPASS|NOPERM|LOADING|MASTERDOWN|CLUSTERDOWN)\b|Connection is closed/m.test(text)
  )
    return 'redis';
  return null;
}

/** How a new observation changes a dependency's state: the next state, and whether that is a change to log. */
export function nextDependencyState(
  dependency: DependencyName,
  previous: DependencyState | undefined,
  failure: { reason: DependencyReason } | null,
  now: number,
  address?: readonly string[],
): { state: DependencyState; change: 'failing' | 'recovered' | null } {
  if (failure === null) {
    if (previous?.status === 'ok') return { state: previous, change: null };
    return { state: { status: 'ok', since: now }, change: previous ? 'recovered' : null };
  }
  if (previous?.status === 'failing' && previous.reason === failure.reason) return { state: previous, change: null };
  // A new reason is a new state (unreachable, then auth_failed once the address is fixed): logged again.
  const since = previous?.status === 'failing' ? previous.since : now;
  const settings = settingsToCheck(dependency, failure.reason, address);
  return { state: { status: 'failing', reason: failure.reason, since, settings }, change: 'failing' };
}

/** A state as /readyz and `status` show it. */
export function dependencyReport(state: DependencyState): DependencyReport {
  const since = new Date(state.since).toISOString();
  return state.status === 'ok'
    ? { status: 'ok', since }
    : { status: 'failing', since, reason: state.reason, settings: state.settings };
}
