import { z } from 'zod';
import { readFileSync } from 'node:fs';
import { readSecretSync, SecretError, type SecretSource } from './secrets.js';
import { parseTokenFile, TokenFileError } from '../core/admin-tokens.js';
import {
  FieldPolicySpecError,
  parseFieldPolicySpec,
  type DeadLetterPayload,
  type FieldPolicySpec,
} from '../core/field-policy.js';
import { ConfigError, type ConfigProblem } from '../core/errors.js';
import { derivedDeploymentId, upstreamId, type Identity } from '../core/identity.js';
import { FORMER_DEFAULT_CHANGELOG } from '../core/changelog.js';

// Configuration comes from the environment only (12-factor), validated once at start-up so that a bad
// setting stops the process with one message naming it instead of failing hours later mid-pass.

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');
const optionalText = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

const hostPorts = z
  .string()
  .min(1)
  .transform((v) => v.split(',').map((b) => b.trim()))
  .refine((list) => list.every((b) => /^[^:\s]+:\d{1,5}$/.test(b)), 'a comma-separated list of host:port');

// Sentinel and Cluster addresses: host:port only; a rediss:// entry is refused with the setting that means it.
const redisHostPorts = z
  .string()
  .refine((v) => !v.includes('://'), 'host:port entries without a scheme (for TLS set REDIS_TLS=true)')
  .pipe(hostPorts);

// The three Redis address settings exclude each other; an empty one (KEY= in a manifest) counts as unset.
const unsetWhenBlank = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => (typeof v === 'string' && v.trim() === '' ? undefined : v), schema.optional());

// A URL setting whose scheme is wrong says so and names the ones it takes (zod's own answer is "Invalid URL").
// Only the scheme of the value is ever quoted: the rest may carry a host or a user name.
const urlOf = (schemes: readonly string[]) =>
  z
    .string()
    .superRefine((value, ctx) => {
      const problem = urlProblem(value, schemes);
      if (problem !== null) ctx.addIssue({ code: 'custom', message: problem });
    })
    // Shown in docs/reference/configuration.md's Allowed column.
    .meta({ format: `${schemes.map((scheme) => `${scheme}://`).join(' or ')} URL` });

/** What is wrong with `value` as a URL of one of `schemes` (null: nothing). */
export function urlProblem(value: string, schemes: readonly string[]): string | null {
  const allowed = schemes.map((s) => `${s}://`).join(' or ');
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]{0,31}):\/\//.exec(value.trim())?.[1]?.toLowerCase();
  if (scheme === undefined) return `not a URL: it needs a scheme, ${allowed}`;
  if (!schemes.includes(scheme)) return `wrong URL scheme ${scheme}://: use ${allowed}`;
  try {
    if (new URL(value.trim()).host === '') return `not a URL: no host after ${scheme}://`;
  } catch {
    return `not a valid ${scheme}:// URL`;
  }
  return null;
}

/** An account id: part of Redis keys, metric labels and (through {account}) topic names. */
export const ACCOUNT_ID = /^[A-Za-z0-9_.-]{1,64}$/;

/** Zod schema of the raw environment: the single source of the settings, their defaults and their limits. */
export const EnvSchema = z.object({
  BRIDGE_ACCOUNT: z
    .string()
    .regex(ACCOUNT_ID, 'letters, digits, _ . - only (it is part of Redis keys and metric labels)')
    .default('default')
    .describe('Source account; namespaces Redis keys ({account} hash tag) and labels metrics'),
  // Names what this installation writes to the changelog and Redis (src/core/identity.ts); derived when unset.
  BRIDGE_DEPLOYMENT_ID: optionalText
    .pipe(
      z
        .string()
        .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'letters, digits, _ . - only, at most 64')
        .optional(),
    )
    .describe(
      'Names this deployment in its changelog records, checkpoints, default changelog topic and transactional id (default: derived from UPSTREAM_BASE_URL, BRIDGE_ACCOUNT, KAFKA_CLIENT_ID and REDIS_KEY_PREFIX; logged at start)',
    ),
  // Several accounts in one process (src/config/accounts.ts); without it, the single account above.
  BRIDGE_ACCOUNTS_FILE: optionalText.describe(
    'YAML or JSON file of several accounts served by one deployment (Several accounts); excludes BRIDGE_ACCOUNT',
  ),
  UPSTREAM_BASE_URL: urlOf(['http', 'https']).describe('Base URL of the reviews API'),
  UPSTREAM_CLIENT_ID: optionalText.describe('Client id of the upstream credentials (or UPSTREAM_CLIENT_ID_FILE)'),
  UPSTREAM_CLIENT_ID_FILE: optionalText.describe('File holding the client id, re-read at every token fetch'),
  UPSTREAM_CLIENT_SECRET: optionalText.describe(
    'Client secret of the upstream credentials (prefer UPSTREAM_CLIENT_SECRET_FILE)',
  ),
  UPSTREAM_CLIENT_SECRET_FILE: optionalText.describe(
    'File holding the client secret, re-read at every token fetch (rotation without restart)',
  ),
  // 9.6/s with a bucket of 1.3 keeps every 1-second window at 10 requests or fewer (bucket < 11 - rate).
  UPSTREAM_RATE_LIMIT_RPS: z.coerce
    .number()
    .positive()
    .max(1000)
    .default(9.6)
    .describe('Request rate for all passes together (the upstream allows 10)'),
  UPSTREAM_RATE_LIMIT_BURST: z.coerce
    .number()
    .min(1)
    .max(1000)
    .default(1.3)
    .describe('Token-bucket size; below 11 − rate, so no 1-second window exceeds 10 requests'),
  UPSTREAM_PAGE_SIZE: int(1, 100).default(100).describe("Reviews asked for per page (the listing's limit parameter)"),
  UPSTREAM_CURSOR_PATH: optionalText.describe('Dotted path of the next-page cursor in the response'),
  UPSTREAM_UPDATED_DATE_UNIT: z
    .enum(['ms', 's'])
    .default('ms')
    .describe('Unit of the updated_date parameter (ms or s)'),
  UPSTREAM_TIMEOUT_MS: int(100, 600_000).default(30_000).describe('Header and body timeouts'),
  UPSTREAM_MAX_RETRIES: int(0, 100).default(6).describe('Retries per request before the pass fails'),
  UPSTREAM_MAX_BODY_BYTES: int(1024, 1024 * 1024 * 1024)
    .default(10 * 1024 * 1024)
    .describe('Cap on a decoded response body'),
  UPSTREAM_TOKEN_REFRESH_MARGIN_S: int(0, 3600).default(60).describe('Refresh the token this long before it expires'),
  // Record bounds (src/upstream/bounds.ts): a record past one is dead-lettered instead of reaching the snapshot.
  UPSTREAM_MAX_FUTURE_SKEW_MS: int(0, 30 * 86_400_000)
    .default(86_400_000)
    .describe('How far past now updated_date/created_date may be (0 – 30 days)'),
  UPSTREAM_MAX_RECORD_BYTES: int(1024, 64 * 1024 * 1024)
    .default(1024 * 1024)
    .describe('Largest record (bytes of its JSON) accepted'),
  UPSTREAM_MAX_STRING_LENGTH: int(16, 64 * 1024 * 1024)
    .default(65_536)
    .describe('Longest string (value or key, UTF-16 units) in a record'),
  UPSTREAM_ALLOW_INSECURE: bool
    .default(false)
    .describe('Allow http:// to a host other than loopback (tokens and secrets in clear text)'),
  UPSTREAM_CA_FILE: optionalText.describe('PEM CA bundle trusted for the upstream, besides the system CAs'),
  // Read by undici's EnvHttpProxyAgent (lower-case forms too); listed so that deployments may set them.
  HTTPS_PROXY: optionalText.describe('Proxy for https upstream requests (CONNECT); lower case accepted'),
  HTTP_PROXY: optionalText.describe('Proxy for http upstream requests; lower case accepted'),
  NO_PROXY: optionalText.describe('Hosts that go direct, comma-separated; lower case accepted'),
  KAFKA_BROKERS: hostPorts.describe('Kafka bootstrap brokers, host:port,... (comma-separated)'),
  KAFKA_CLIENT_ID: z
    .string()
    .min(1)
    .default('reviews-bridge')
    .describe('Kafka client id of the producers and admin clients; also the default transactional id prefix'),
  KAFKA_SSL: bool.default(false).describe('TLS to the brokers'),
  KAFKA_SSL_CA_FILE: optionalText.describe(
    'PEM CA bundle to trust for the brokers (setting any KAFKA_SSL_* file turns TLS on)',
  ),
  KAFKA_SSL_CERT_FILE: optionalText.describe('PEM client certificate for mutual TLS'),
  KAFKA_SSL_KEY_FILE: optionalText.describe('PEM client key for mutual TLS'),
  KAFKA_SASL_ALLOW_PLAINTEXT: bool
    .default(false)
    .describe('Allow SASL plain without TLS (the password crosses the network readable)'),
  KAFKA_SASL_MECHANISM: z
    .enum(['plain', 'scram-sha-256', 'scram-sha-512'])
    .optional()
    .describe('SASL mechanism: plain, scram-sha-256 or scram-sha-512'),
  KAFKA_SASL_USERNAME: optionalText.describe('SASL user name'),
  KAFKA_SASL_PASSWORD: optionalText.describe('SASL password (prefer KAFKA_SASL_PASSWORD_FILE)'),
  KAFKA_SASL_PASSWORD_FILE: optionalText.describe('File holding the SASL password, re-read at every broker connection'),
  KAFKA_TOPIC_CREATED: z
    .string()
    .min(1)
    .default('review.created')
    .describe('Topic of review.created events; may contain {account}'),
  KAFKA_TOPIC_STATUS_CHANGED: z
    .string()
    .min(1)
    .default('review.status_changed')
    .describe('Topic of review.status_changed events; may contain {account}'),
  KAFKA_TOPIC_UPDATED: z
    .string()
    .min(1)
    .default('review.updated')
    .describe('Topic of review.updated events; may contain {account}'),
  KAFKA_TOPIC_DEAD_LETTER: z
    .string()
    .min(1)
    .default('review.dead_letter')
    .describe('Dead-letter topic (records that failed validation, with the reason); may contain {account}'),
  KAFKA_TOPIC_STATE: z
    .string()
    .min(1)
    .default('review.state')
    .describe('Compacted current-state topic (key: review id; tombstone on deletion); may contain {account}'),
  KAFKA_TOPIC_DELETED: z
    .string()
    .min(1)
    .default('review.deleted')
    .describe('Topic of review.deleted events; may contain {account}'),
  KAFKA_TOPIC_HEARTBEAT: z
    .string()
    .min(1)
    .default('review.heartbeat')
    .describe('Topic of review.heartbeat events (key: account); may contain {account}'),
  // Internal compacted topic: snapshot entries and checkpoints, what a Redis that lost them is restored from.
  // Unset: a topic of this deployment's own (two deployments never share one by default).
  KAFKA_TOPIC_CHANGELOG: optionalText.describe(
    'Internal compacted changelog (snapshot entries and checkpoints) that Redis is restored from; may contain {account} (default: reviews-bridge.changelog.<deployment id>)',
  ),
  // Records of a changelog written before deployment identities (an upgrade whose Redis was lost on the way).
  KAFKA_CHANGELOG_ADOPT_LEGACY: bool
    .default(false)
    .describe(
      "Take an account's changelog records written before deployment identities as this deployment's even when Redis cannot vouch for them",
    ),
  // on: each page's records in one Kafka transaction (exactly once for read_committed consumers); off: idempotent
  // at-least-once publishing (duplicates carry the same event id).
  KAFKA_EXACTLY_ONCE: z
    .enum(['on', 'off', 'true', 'false'])
    .default('on')
    .transform((v) => v === 'on' || v === 'true')
    .describe(
      'on: each commit in one Kafka transaction (exactly once for read_committed consumers); off: idempotent at-least-once',
    ),
  // transactional.id = <this>.<account>: stable per account and deployment, so a new leader fences the old one.
  KAFKA_TRANSACTIONAL_ID_PREFIX: optionalText.describe(
    'Prefix of the transactional id <prefix>.<account> (default: <KAFKA_CLIENT_ID>.<deployment id>); stable per deployment so a new leader fences the old one',
  ),
  KAFKA_TRANSACTION_TIMEOUT_MS: int(1_000, 900_000)
    .default(60_000)
    .describe('Kafka transaction timeout: an open transaction of a dead leader is aborted after it at the latest'),
  // Secret (>= 16 bytes) that keys the review fingerprints written to Kafka and the event ids built from them;
  // unset: a key generated once per deployment, kept in Redis, copied to the changelog topic only wrapped with
  // FINGERPRINT_KEK_FILE, and only when one of the two is set (docs/security.md).
  FINGERPRINT_KEY_FILE: optionalText.describe(
    'Secret (at least 16 bytes) that keys review fingerprints and event ids (recommended); unset: a key generated once per deployment and kept in Redis, which needs FINGERPRINT_KEK_FILE or FINGERPRINT_KEY_GENERATE=true',
  ),
  FINGERPRINT_KEK_FILE: optionalText.describe(
    'Key-encryption key (at least 32 bytes) that wraps (AES-256-GCM) the generated fingerprint key before it is copied to the changelog topic, so a Redis loss gets the same key back; only without FINGERPRINT_KEY_FILE',
  ),
  FINGERPRINT_KEY_GENERATE: bool
    .default(false)
    .describe(
      'Without FINGERPRINT_KEY_FILE and FINGERPRINT_KEK_FILE: allow a generated fingerprint key kept in Redis only (demo, tests); a Redis loss then costs the edits made until the next sweep',
    ),
  KAFKA_CREATE_TOPICS: bool.default(true).describe('Create missing topics at start'),
  KAFKA_TOPIC_PARTITIONS: int(1, 10_000).default(6).describe('Partitions of the topics the bridge creates'),
  // Unset: the brokers' default.replication.factor and min.insync.replicas (KIP-464), never a count of brokers.
  KAFKA_REPLICATION_FACTOR: unsetWhenBlank(int(1, 10)).describe(
    "Replication factor of the topics it creates (default: the brokers' default.replication.factor and min.insync.replicas; set: exactly this, min.insync.replicas=2 from 3)",
  ),
  // Kafka's own default (message.max.bytes / max.message.bytes); the smaller of this and the topics' setting counts.
  KAFKA_MAX_MESSAGE_BYTES: int(4096, 1024 * 1024 * 1024)
    .default(1024 * 1024)
    .describe("Largest message sent; the topics' smaller max.message.bytes wins (read at start)"),
  // Opt-in: the event contracts in a schema registry (docs/consumers.md, "With a schema registry").
  SCHEMA_REGISTRY_URL: unsetWhenBlank(urlOf(['http', 'https'])).describe(
    'Confluent-compatible schema registry API (Apicurio: http://host:8080/apis/ccompat/v7); unset: no registry',
  ),
  SCHEMA_REGISTRY_USERNAME: optionalText.describe('Basic-auth user of the schema registry'),
  SCHEMA_REGISTRY_PASSWORD: optionalText.describe('Basic-auth password (prefer SCHEMA_REGISTRY_PASSWORD_FILE)'),
  SCHEMA_REGISTRY_PASSWORD_FILE: optionalText.describe('File holding the registry password, re-read at every request'),
  SCHEMA_REGISTRY_CA_FILE: optionalText.describe('PEM CA bundle trusted for the registry, besides the system CAs'),
  SCHEMA_REGISTRY_COMPATIBILITY: z
    .enum(['BACKWARD', 'BACKWARD_TRANSITIVE', 'FORWARD', 'FORWARD_TRANSITIVE', 'FULL', 'FULL_TRANSITIVE', 'NONE'])
    .default('BACKWARD')
    .describe("Rule put on a subject whose rule is missing or NONE (a subject's own other rule wins)"),
  SCHEMA_REGISTRY_WIRE_FORMAT: z
    .enum(['structured', 'confluent'])
    .default('structured')
    .describe('structured: CloudEvents JSON; confluent: magic byte + schema id + data JSON, attributes in ce_ headers'),
  REDIS_URL: unsetWhenBlank(urlOf(['redis', 'rediss'])).describe(
    'A single Redis: redis:// or rediss://; one of REDIS_URL, REDIS_SENTINELS, REDIS_CLUSTER_NODES',
  ),
  REDIS_SENTINELS: unsetWhenBlank(redisHostPorts).describe(
    'Redis Sentinels host:port,... (with REDIS_SENTINEL_NAME); one of REDIS_URL, REDIS_SENTINELS, REDIS_CLUSTER_NODES',
  ),
  REDIS_SENTINEL_NAME: optionalText.describe('Name of the primary the Sentinels monitor'),
  REDIS_CLUSTER_NODES: unsetWhenBlank(redisHostPorts).describe(
    'Redis Cluster seed nodes host:port,...; one of REDIS_URL, REDIS_SENTINELS, REDIS_CLUSTER_NODES',
  ),
  // Replica acknowledgements (WAIT) every commit and lease change needs before the bridge goes on; unset:
  // 0 on every topology since Redis became a cache of the Kafka changelog (docs/operations.md, Redis durability).
  REDIS_WAIT_REPLICAS: int(0, 10)
    .optional()
    .describe(
      'Replicas that must acknowledge (WAIT) each commit and lease change before the bridge builds on it (0: none; a failover that loses commits then costs a restore from Kafka)',
    ),
  REDIS_WAIT_FOR_REPLICAS: bool
    .default(false)
    .describe(
      'Start even when a Redis primary has fewer replicas than REDIS_WAIT_REPLICAS, and wait (not ready) for them',
    ),
  REDIS_WAIT_TIMEOUT_MS: int(10, 60_000)
    .default(1_000)
    .describe('How long a commit waits for them (short: the pass is retried)'),
  REDIS_USERNAME: optionalText.describe('Redis ACL user (the default user when only a password is set)'),
  REDIS_PASSWORD: optionalText.describe('Redis password (prefer REDIS_PASSWORD_FILE)'),
  REDIS_PASSWORD_FILE: optionalText.describe('File holding the Redis password, re-read at every reconnect'),
  REDIS_TLS_CA_FILE: optionalText.describe('PEM CA bundle to trust for Redis (rediss:// or REDIS_TLS=true)'),
  REDIS_TLS_CERT_FILE: optionalText.describe('PEM client certificate for Redis (rediss:// or REDIS_TLS=true)'),
  REDIS_TLS_KEY_FILE: optionalText.describe('PEM client key for Redis (rediss:// or REDIS_TLS=true)'),
  // Sentinel and Cluster addresses are host:port lists without a scheme: this switch is their rediss://.
  REDIS_TLS: unsetWhenBlank(bool).describe(
    'TLS to every Redis member: the Sentinels, the primary and replicas they announce, each Cluster node (REDIS_TLS_* files apply to all); a rediss:// REDIS_URL implies it',
  ),
  REDIS_SENTINEL_USERNAME: optionalText.describe('ACL user of the Sentinels themselves (REDIS_SENTINELS only)'),
  REDIS_SENTINEL_PASSWORD: optionalText.describe(
    'Password of the Sentinels themselves, when they require one (prefer REDIS_SENTINEL_PASSWORD_FILE)',
  ),
  REDIS_SENTINEL_PASSWORD_FILE: optionalText.describe(
    "File holding the Sentinels' password, re-read at every reconnect",
  ),
  REDIS_KEY_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,32}$/)
    .default('rb')
    .describe('Prefix of every Redis key the bridge writes (several deployments may share one Redis)'),
  POLL_INTERVAL_MS: int(100, 3_600_000)
    .default(1_000)
    .describe(
      'Time between incremental poll starts, whatever else runs (sweeps, resyncs and the initial load yield the rate budget to polls)',
    ),
  // Until polls kept their pace during sweeps, this was the interval while none ran (the only one now).
  POLL_MIN_INTERVAL_MS: int(100, 3_600_000)
    .optional()
    .describe('Deprecated: the poll interval when POLL_INTERVAL_MS is not set (one interval applies always now)'),
  POLL_OVERLAP_MS: int(0, 7 * 86_400_000)
    .default(300_000)
    .describe(
      'The most polls look back before the watermark (the ceiling of the learned lookback; with POLL_LOOKBACK=fixed, always this)',
    ),
  POLL_LOOKBACK: z
    .enum(['learned', 'fixed'])
    .default('learned')
    .describe(
      'learned: polls look back twice the latest lateness seen in the last hour (POLL_LOOKBACK_MIN_MS..POLL_OVERLAP_MS); fixed: POLL_OVERLAP_MS',
    ),
  POLL_LOOKBACK_MIN_MS: int(0, 3_600_000)
    .default(1_000)
    .describe("The least polls look back before the watermark: the listing's timestamp granularity, and some slack"),
  FRESHNESS_BOUND_MS: int(0, 3_600_000)
    .default(30_000)
    .describe(
      'The most a change that shows late (up to POLL_OVERLAP_MS after its updated_date) waits once it shows: trailing reads behind the polls (0: none, such changes wait for a sweep)',
    ),
  SWEEP_INTERVAL_MS: int(0, 30 * 86_400_000)
    .default(86_400_000)
    .describe('Scheduled sweeps (0: only on demand)'),
  INITIAL_LOAD_MODE: z
    .enum(['mark', 'suppress'])
    .default('mark')
    .describe('mark initial review.created events, or suppress them'),
  DELETE_DETECTION: z
    .enum(['on', 'off'])
    .default('on')
    .describe('on: a complete sweep reports reviews missing from the listing as review.deleted; off: never'),
  // A broken listing that silently drops reviews must not wipe the feed: above this fraction nothing is deleted.
  DELETE_MAX_FRACTION: z.coerce
    .number()
    .min(0)
    .max(1)
    .default(0.01)
    .describe('Above this fraction of the snapshot missing in one sweep, nothing is deleted (broken listing guard)'),
  HEARTBEAT_INTERVAL_MS: int(1_000, 86_400_000)
    .default(60_000)
    .describe('How often the leader publishes review.heartbeat'),
  EVENT_SOURCE: optionalText.describe('CloudEvents source of the events (default urn:reviews-bridge:<account>)'),
  HTTP_HOST: z.string().min(1).default('0.0.0.0').describe('Address of the ops server (/metrics, /healthz, /readyz)'),
  HTTP_PORT: int(0, 65_535).default(9464).describe('Port of the ops server (0: any free port)'),
  // The admin HTTP API (src/admin/): off unless ADMIN_PORT is set, on its own port so that a NetworkPolicy can admit
  // it apart from /metrics; bearer tokens from ADMIN_TOKEN_FILE (docs/operations.md, Admin API).
  ADMIN_PORT: unsetWhenBlank(int(0, 65_535)).describe(
    'Port of the admin HTTP API (unset: no admin API; 0: any free port); needs ADMIN_TOKEN_FILE',
  ),
  ADMIN_HOST: optionalText.describe('Address of the admin API (default: HTTP_HOST)'),
  ADMIN_TOKEN_FILE: optionalText.describe(
    'File of the admin API bearer tokens, one name:token a line (or one bare token, named default); re-read when it changes',
  ),
  ADMIN_TLS_CERT_FILE: optionalText.describe('PEM certificate (chain) of the admin API: HTTPS with ADMIN_TLS_KEY_FILE'),
  ADMIN_TLS_KEY_FILE: optionalText.describe('PEM private key of the admin API certificate'),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .default('info')
    .describe('Log level (pino): the least severe level written'),
  LEASE_TTL_MS: int(1_000, 600_000).default(15_000).describe('Leadership lease; standbys take over within it'),
  // Process-wide (not LEASE_*): a replica that wins hundreds of leases at once (start-up, a failover) would open
  // hundreds of transactional producers at the same moment and time them all out; it starts them in waves instead.
  LEADERSHIP_START_CONCURRENCY: int(1, 1_000)
    .default(8)
    .describe(
      'Leaderships this replica starts at once (Kafka producers connected, transactional id taken, Redis checked against the changelog); the others wait, their leases kept',
    ),
  // Personal data (src/core/field-policy.ts): dotted paths, comma-separated; EVENT_FIELDS_MASK entries are path[:N].
  EVENT_FIELDS_INCLUDE: optionalText.describe(
    'Allow-list of dotted paths; other fields, unknown ones too, are dropped',
  ),
  EVENT_FIELDS_EXCLUDE: optionalText.describe('Dotted paths never published'),
  EVENT_FIELDS_HASH: optionalText.describe('Dotted paths published as hmac-sha256:<hex> (needs EVENT_HASH_KEY_FILE)'),
  EVENT_FIELDS_MASK: optionalText.describe('path (→ ***) or path:N (first N characters, then ***), comma-separated'),
  EVENT_HASH_KEY_FILE: optionalText.describe(
    'HMAC key (≥ 32 bytes), read at start; with it e-mail addresses are hashed',
  ),
  EVENT_FIELDS_ALLOW_RAW_EMAIL: bool
    .default(false)
    .describe('Publish e-mail addresses as received (logged as a warning at start)'),
  DEAD_LETTER_PAYLOAD: z
    .enum(['reference', 'masked', 'raw'])
    .default('masked')
    .describe('masked (policy applied), reference (size only) or raw (warned at start)'),
  SHUTDOWN_TIMEOUT_MS: int(1_000, 600_000).default(25_000).describe('Bound on graceful shutdown'),
  // OpenTelemetry traces (src/app/tracing.ts), by the standard variables; the exporter reads the other OTLP ones.
  OTEL_SDK_DISABLED: bool.default(false).describe('true: no tracing whatever the other OTEL_* settings say'),
  OTEL_TRACES_EXPORTER: z
    .enum(['otlp', 'none'])
    .optional()
    .describe('otlp: send traces (OTLP over HTTP, JSON); none: off. Unset: on when an OTLP endpoint is set'),
  OTEL_EXPORTER_OTLP_ENDPOINT: unsetWhenBlank(urlOf(['http', 'https'])).describe(
    'Base URL of the OTLP/HTTP receiver (traces go to <it>/v1/traces); setting it turns tracing on',
  ),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: unsetWhenBlank(urlOf(['http', 'https'])).describe(
    'Full URL traces are POSTed to (wins over OTEL_EXPORTER_OTLP_ENDPOINT); setting it turns tracing on',
  ),
  OTEL_SERVICE_NAME: z.string().min(1).default('reviews-bridge').describe('service.name of the spans'),
  OTEL_BSP_SCHEDULE_DELAY: int(10, 600_000).default(5_000).describe('Milliseconds between two exports of spans'),
});

/** Every environment variable the bridge reads (deployment manifests are tested against it). */
export const ENV_VARS: readonly string[] = Object.keys(EnvSchema.shape);

/** The validated configuration the bridge runs with. */
export interface BridgeConfig {
  account: string;
  upstream: {
    baseUrl: string;
    clientId: SecretSource;
    clientSecret: SecretSource;
    rateLimitRps: number;
    rateLimitBurst: number;
    pageSize: number;
    cursorPath: string | undefined;
    updatedDateUnit: 'ms' | 's';
    timeoutMs: number;
    maxRetries: number;
    maxBodyBytes: number;
    tokenRefreshMarginSeconds: number;
    maxFutureSkewMs: number;
    maxRecordBytes: number;
    maxStringLength: number;
    /** PEM bundle trusted for the upstream's certificate (besides the system CAs); null: system CAs only. */
    caFile: string | null;
  };
  kafka: {
    brokers: string[];
    clientId: string;
    ssl: boolean;
    /** PEM files for TLS: a CA bundle to trust, and a client certificate and key for mutual TLS. */
    tls?: TlsFiles;
    sasl: { mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512'; username: string; password: SecretSource } | null;
    topics: {
      created: string;
      statusChanged: string;
      updated: string;
      deadLetter: string;
      /** Compacted current-state topic (key = review id). */
      state: string;
      deleted: string;
      heartbeat: string;
      /** Internal compacted changelog (snapshot entries and checkpoints). */
      changelog: string;
    };
    /** Kafka transactions (exactly once for read_committed readers); false: idempotent at-least-once. */
    exactlyOnce: boolean;
    /** transactional.id of this account's producer (stable per account and deployment). */
    transactionalId: string;
    /**
     * Who writes this account's changelog (stamped on its records and checkpoints, checked before a restore trusts
     * them); absent in adapters built by hand (tests, benchmarks): nothing stamped, nothing checked.
     */
    identity?: Identity;
    /**
     * Put before every changelog key when accounts share the changelog topic (`<account>:`); absent: keyPrefix.
     * Single-account changelogs keep plain keys and name their account in a header.
     */
    changelogKeyPrefix?: string;
    /** Whether the changelog topic is the default one of the deployment (KAFKA_TOPIC_CHANGELOG unset). */
    changelogDefaulted?: boolean;
    /** Adopt changelog records written before identities without Redis vouching for them. */
    adoptLegacyChangelog?: boolean;
    transactionTimeoutMs: number;
    createTopics: boolean;
    partitions: number;
    /** null: the brokers' default.replication.factor and min.insync.replicas. */
    replicationFactor: number | null;
    /**
     * Put before the review id in every record key when accounts share a topic (`<account>:`), so that one
     * account's rows never compact another's; empty with a single account or a topic per account.
     */
    keyPrefix?: string;
    /**
     * Largest Kafka message the bridge sends (value, key and headers); larger events are cut or dead-lettered.
     * Optional for adapters built by hand (tests, benchmarks): 1 MiB, Kafka's own default, when absent.
     */
    maxMessageBytes?: number;
  };
  redis: RedisConnection & {
    keyPrefix: string;
    /** ACL user (REDIS_USERNAME) and password source, kept out of the URL so they are never logged with it. */
    username?: string | null;
    password?: SecretSource | null;
    /** TLS files of a rediss:// REDIS_URL, or of every member when tlsEnabled. */
    tls?: TlsFiles;
    /** TLS to every member (REDIS_TLS; a rediss:// REDIS_URL is TLS whatever this says). */
    tlsEnabled?: boolean;
    /** ACL user and password source of the Sentinels themselves (REDIS_SENTINEL_*); null: no AUTH to them. */
    sentinelUsername?: string | null;
    sentinelPassword?: SecretSource | null;
  };
  /**
   * Polls start every intervalMs whatever else runs, from the watermark less a lookback: learned from late changes
   * between lookbackFloorMs and overlapMs, or (fixed) overlapMs.
   */
  poll: {
    intervalMs: number;
    overlapMs: number;
    lookback: 'learned' | 'fixed';
    lookbackFloorMs: number;
    /** FRESHNESS_BOUND_MS: the widest trailing read's period (0: none). */
    freshnessBoundMs: number;
    /** Reviews the rate budget reads in one poll interval (UPSTREAM_RATE_LIMIT_RPS x UPSTREAM_PAGE_SIZE): caps the lookback. */
    readsPerInterval: number;
    /** UPSTREAM_PAGE_SIZE: prices each trailing tier's share of the budget in requests. */
    pageSize: number;
  };
  sweep: { intervalMs: number };
  initialLoadMode: 'mark' | 'suppress';
  /** Deletion detection at the end of a complete sweep, and its guard against a broken listing. */
  deletion: { enabled: boolean; maxFraction: number };
  heartbeat: { intervalMs: number };
  eventSource: string;
  http: { host: string; port: number };
  /** The admin HTTP API; null when ADMIN_PORT is not set. */
  admin?: AdminConfig | null;
  logLevel: string;
  lease: { ttlMs: number };
  /** How many leaderships the process starts at once (process-wide: read from the first account). */
  leadership: { startConcurrency: number };
  shutdownTimeoutMs: number;
  /** What may leave the process of a review (events, dead letters). */
  privacy: PrivacyConfig;
  /** File of the secret that keys fingerprints and event ids; null: a generated key (Redis, wrapped copy or none). */
  fingerprintKeyFile: string | null;
  /** File of the key that wraps the generated key's changelog copy; null or absent: no copy. */
  fingerprintKekFile?: string | null;
  /** OpenTelemetry traces (OTEL_*): whether they are sent, where to, under which service name. */
  tracing: TracingConfig;
  /** The schema registry holding the topics' contracts (SCHEMA_REGISTRY_URL); null or absent: none. */
  schemaRegistry?: SchemaRegistryConfig | null;
}

/** Where the event contracts are registered, how to authenticate, and how records are framed. */
export interface SchemaRegistryConfig {
  /** Base URL of the Confluent-compatible API, without a trailing slash or credentials. */
  url: string;
  username: string | null;
  password: SecretSource | null;
  /** PEM bundle trusted for the registry's certificate (besides the system CAs); null: system CAs only. */
  caFile: string | null;
  /** The rule put on a subject whose rule is missing or NONE. */
  compatibility: string;
  wireFormat: 'structured' | 'confluent';
}

/** The OpenTelemetry settings of the process. */
export interface TracingConfig {
  enabled: boolean;
  /** The URL spans are POSTed to; null: the exporter's default (http://localhost:4318/v1/traces). */
  endpoint: string | null;
  serviceName: string;
  /** Milliseconds between two batched exports. */
  scheduleDelayMs: number;
}

/** Where and how the admin HTTP API listens. */
export interface AdminConfig {
  host: string;
  /** 0 picks a free port (tests). */
  port: number;
  /** The bearer tokens (re-read when the file changes). */
  tokenFile: string;
  /** HTTPS with this certificate and key; null: plain HTTP. */
  tls: { certFile: string; keyFile: string } | null;
}

/** PEM files of a TLS connection (paths; null when not set). */
export interface TlsFiles {
  caFile: string | null;
  certFile: string | null;
  keyFile: string | null;
}

/** The personal-data settings: the field policy, its hash key and what dead letters carry. */
export interface PrivacyConfig {
  fields: FieldPolicySpec;
  /** Key of the HMAC for hashed fields (read at start; a new key changes every token). */
  hashKey: SecretSource | null;
  deadLetterPayload: DeadLetterPayload;
}

/** Where the bridge's Redis is: one server, a Sentinel-monitored primary, or a Redis Cluster. */
export type RedisTarget =
  | { kind: 'standalone'; url: string }
  | { kind: 'sentinel'; sentinels: HostPort[]; name: string }
  | { kind: 'cluster'; nodes: HostPort[] };

/** A host and port of a Sentinel or a Cluster node. */
export interface HostPort {
  host: string;
  port: number;
}

/** How to reach Redis and how durable a write must be before the bridge builds on it. */
export interface RedisConnection {
  target: RedisTarget;
  /** Replicas that must acknowledge a commit or a lease change (Redis WAIT); 0 = none. */
  waitReplicas: number;
  waitTimeoutMs: number;
  /** Start (not ready) even when the topology has fewer replicas than waitReplicas, instead of refusing. */
  waitForReplicas?: boolean;
}

/** Re-exported from the one error model, where it is defined. */
export { ConfigError };

function secret(env: Record<string, string | undefined>, name: string, required: boolean): SecretSource | null {
  const value = env[name]?.trim();
  const file = env[`${name}_FILE`]?.trim();
  if (value && file) throw new ConfigError(name, `set either ${name} or ${name}_FILE, not both`);
  if (file) {
    try {
      readSecretSync({ file }, name);
    } catch (err) {
      throw new ConfigError(
        `${name}_FILE`,
        err instanceof SecretError && /empty/.test(err.message) ? 'file is empty' : 'file cannot be read',
      );
    }
    return { file };
  }
  if (value) return { value };
  if (required) throw new ConfigError(name, `required (or ${name}_FILE)`);
  return null;
}

// Thrown (and caught by Checks.run) when a rule reads a setting whose value was already reported as invalid.
const ALREADY_REPORTED = Symbol('already reported');

// The result of an earlier rule for a later one: undefined (that rule failed, its problem recorded) skips the later.
function known<T>(result: T | undefined): T {
  if (result === undefined) throw ALREADY_REPORTED;
  return result;
}

/**
 * The problems of one configuration, gathered instead of thrown at the first. A rule that reads a setting the
 * schema refused is skipped (its problem is the one already reported); a rule that fails returns undefined, which
 * is never read: throwIfAny ends the load whenever a rule failed or was skipped.
 */
class Checks {
  private readonly problems: ConfigProblem[] = [];

  /** The environment as the schema reads it; a setting it refused throws ALREADY_REPORTED when read. */
  parse(env: Record<string, string | undefined>): Env {
    const parsed = EnvSchema.safeParse(env);
    if (parsed.success) return parsed.data;
    const refused = new Set<string>();
    for (const issue of parsed.error.issues) {
      const setting = String(issue.path[0] ?? 'environment');
      if (refused.has(setting)) continue;
      refused.add(setting);
      const problem = env[setting] === undefined || env[setting] === '' ? 'required' : issue.message;
      this.problems.push({ setting, problem });
    }
    // The other settings are still read by the schema, and the rules that need only them still run.
    const rest = EnvSchema.extend(Object.fromEntries([...refused].map((name) => [name, z.unknown()]))).safeParse(env);
    if (!rest.success) this.throwIfAny();
    return new Proxy(rest.data as Env, {
      get(target, key, receiver) {
        if (typeof key === 'string' && refused.has(key)) throw ALREADY_REPORTED;
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
  }

  /** Runs one rule; a ConfigError it throws is recorded and the load goes on with the next rule. */
  run<T>(rule: () => T): T {
    try {
      return rule();
    } catch (err) {
      if (err instanceof ConfigError) this.problems.push(...err.problems);
      else if (err !== ALREADY_REPORTED) throw err;
      return undefined as T;
    }
  }

  /** Throws every problem found, in the order found, one per setting and message. */
  throwIfAny(): void {
    if (this.problems.length === 0) return;
    const seen = new Set<string>();
    const unique = this.problems.filter((p) => {
      const line = `${p.setting}: ${p.problem}`;
      return !seen.has(line) && seen.add(line);
    });
    throw new ConfigError(unique);
  }
}

/**
 * Parses and validates the environment; throws one ConfigError listing every bad setting (one problem a line), so
 * that an operator fixes them all after one start instead of one per restart.
 */
export function loadConfig(
  env: Record<string, string | undefined> = process.env,
  /** One account of several (BRIDGE_ACCOUNTS_FILE): the derived deployment id leaves the account out. */
  options: { multiAccount?: boolean } = {},
): BridgeConfig {
  const checks = new Checks();
  const e = checks.parse(env);
  checks.run(() => {
    const url = new URL(e.UPSTREAM_BASE_URL);
    if (url.username || url.password) {
      throw new ConfigError('UPSTREAM_BASE_URL', 'must not contain credentials (use UPSTREAM_CLIENT_ID/_SECRET)');
    }
    if (url.protocol === 'http:' && !isLoopback(url.hostname) && !e.UPSTREAM_ALLOW_INSECURE) {
      // Bearer tokens and client secrets would cross the network in clear text.
      throw new ConfigError('UPSTREAM_BASE_URL', 'must be https:// (or set UPSTREAM_ALLOW_INSECURE=true)');
    }
  });
  const clientId = checks.run(() => secret(env, 'UPSTREAM_CLIENT_ID', true)!);
  const clientSecret = checks.run(() => secret(env, 'UPSTREAM_CLIENT_SECRET', true)!);
  const sasl = checks.run((): BridgeConfig['kafka']['sasl'] => {
    if (!e.KAFKA_SASL_MECHANISM) return null;
    const username = checks.run(() => {
      if (!e.KAFKA_SASL_USERNAME)
        throw new ConfigError('KAFKA_SASL_USERNAME', 'required when KAFKA_SASL_MECHANISM is set');
      return e.KAFKA_SASL_USERNAME;
    });
    const password = secret(env, 'KAFKA_SASL_PASSWORD', true)!;
    return { mechanism: e.KAFKA_SASL_MECHANISM, username, password };
  });
  const kafkaTls = checks.run(() => tlsFiles(e, 'KAFKA_SSL'));
  const kafkaSsl = checks.run(() => e.KAFKA_SSL || Object.values(known(kafkaTls)).some((f) => f !== null));
  checks.run(() => {
    if (known(sasl)?.mechanism === 'plain' && !known(kafkaSsl) && !e.KAFKA_SASL_ALLOW_PLAINTEXT) {
      // SASL PLAIN sends the password itself; without TLS anyone on the path reads it.
      throw new ConfigError(
        'KAFKA_SASL_MECHANISM',
        'plain needs TLS (KAFKA_SSL=true), or set KAFKA_SASL_ALLOW_PLAINTEXT=true to send the password in clear text',
      );
    }
  });
  const redisUrl = checks.run(() => {
    const url = e.REDIS_URL === undefined ? null : new URL(e.REDIS_URL);
    if (url?.password) {
      throw new ConfigError('REDIS_URL', 'must not contain a password (use REDIS_PASSWORD_FILE and REDIS_USERNAME)');
    }
    return url;
  });
  const redisTls = checks.run(() => tlsFiles(e, 'REDIS_TLS'));
  const redisTlsEnabled = checks.run(() => redisTlsSwitch(e, known(redisUrl), known(redisTls)));
  const redisPassword = checks.run(() => secret(env, 'REDIS_PASSWORD', false));
  const sentinelPassword = checks.run(() => secret(env, 'REDIS_SENTINEL_PASSWORD', false));
  checks.run(() => {
    if (!e.REDIS_SENTINELS && (known(sentinelPassword) || e.REDIS_SENTINEL_USERNAME)) {
      const setting = e.REDIS_SENTINEL_USERNAME ? 'REDIS_SENTINEL_USERNAME' : 'REDIS_SENTINEL_PASSWORD';
      throw new ConfigError(setting, 'only used with REDIS_SENTINELS');
    }
    if (e.REDIS_SENTINEL_USERNAME && !sentinelPassword) {
      throw new ConfigError('REDIS_SENTINEL_PASSWORD', 'required when REDIS_SENTINEL_USERNAME is set (or its _FILE)');
    }
  });
  const deployment = checks.run(
    () => e.BRIDGE_DEPLOYMENT_ID ?? derivedDeploymentId(deploymentParts(e, options.multiAccount === true)),
  );
  const topics = checks.run(() => kafkaTopics(e, known(deployment)));
  // The deprecated setting stands in for the interval only when the interval itself was not set.
  const pollIntervalMs = checks.run(() =>
    env.POLL_INTERVAL_MS ? e.POLL_INTERVAL_MS : (e.POLL_MIN_INTERVAL_MS ?? e.POLL_INTERVAL_MS),
  );
  checks.run(() => {
    if (e.POLL_OVERLAP_MS < known(pollIntervalMs)) {
      // The overlap must cover at least one poll interval, or a change made while a poll pages could be skipped.
      throw new ConfigError('POLL_OVERLAP_MS', 'must be at least POLL_INTERVAL_MS');
    }
  });
  const privacy = checks.run(() => privacyConfig(e));
  const target = checks.run(() => redisTarget(e));
  const admin = checks.run(() => adminConfig(e));
  const caFile = checks.run(() => readableFile(e, 'UPSTREAM_CA_FILE'));
  const keyFile = checks.run(() => fingerprintKeyFile(e));
  const kekFile = checks.run(() => fingerprintKekFile(e));
  checks.throwIfAny();
  return {
    account: e.BRIDGE_ACCOUNT,
    upstream: {
      baseUrl: e.UPSTREAM_BASE_URL.replace(/\/+$/, ''),
      clientId,
      clientSecret,
      rateLimitRps: e.UPSTREAM_RATE_LIMIT_RPS,
      rateLimitBurst: e.UPSTREAM_RATE_LIMIT_BURST,
      pageSize: e.UPSTREAM_PAGE_SIZE,
      cursorPath: e.UPSTREAM_CURSOR_PATH,
      updatedDateUnit: e.UPSTREAM_UPDATED_DATE_UNIT,
      timeoutMs: e.UPSTREAM_TIMEOUT_MS,
      maxRetries: e.UPSTREAM_MAX_RETRIES,
      maxBodyBytes: e.UPSTREAM_MAX_BODY_BYTES,
      tokenRefreshMarginSeconds: e.UPSTREAM_TOKEN_REFRESH_MARGIN_S,
      maxFutureSkewMs: e.UPSTREAM_MAX_FUTURE_SKEW_MS,
      maxRecordBytes: e.UPSTREAM_MAX_RECORD_BYTES,
      maxStringLength: e.UPSTREAM_MAX_STRING_LENGTH,
      caFile,
    },
    kafka: {
      brokers: e.KAFKA_BROKERS,
      clientId: e.KAFKA_CLIENT_ID,
      ssl: kafkaSsl,
      tls: kafkaTls,
      sasl,
      topics,
      exactlyOnce: e.KAFKA_EXACTLY_ONCE,
      // Unique per deployment by default: two deployments keeping the defaults must not fence each other.
      transactionalId: `${e.KAFKA_TRANSACTIONAL_ID_PREFIX ?? `${e.KAFKA_CLIENT_ID}.${deployment}`}.${e.BRIDGE_ACCOUNT}`,
      identity: { deployment, upstream: upstreamId(e.UPSTREAM_BASE_URL.replace(/\/+$/, ''), clientIdText(clientId)) },
      changelogDefaulted: e.KAFKA_TOPIC_CHANGELOG === undefined,
      adoptLegacyChangelog: e.KAFKA_CHANGELOG_ADOPT_LEGACY,
      transactionTimeoutMs: e.KAFKA_TRANSACTION_TIMEOUT_MS,
      createTopics: e.KAFKA_CREATE_TOPICS,
      partitions: e.KAFKA_TOPIC_PARTITIONS,
      replicationFactor: e.KAFKA_REPLICATION_FACTOR ?? null,
      maxMessageBytes: e.KAFKA_MAX_MESSAGE_BYTES,
    },
    redis: {
      target,
      keyPrefix: e.REDIS_KEY_PREFIX,
      // 0 by default on every topology: Redis is a cache of the Kafka changelog, and a failover that loses commits
      // is caught at the next read or commit and repaired from Kafka (docs/operations.md, Redis durability).
      waitReplicas: e.REDIS_WAIT_REPLICAS ?? 0,
      waitTimeoutMs: e.REDIS_WAIT_TIMEOUT_MS,
      waitForReplicas: e.REDIS_WAIT_FOR_REPLICAS,
      username: e.REDIS_USERNAME ?? null,
      password: redisPassword,
      tls: redisTls,
      tlsEnabled: redisTlsEnabled,
      sentinelUsername: e.REDIS_SENTINEL_USERNAME ?? null,
      sentinelPassword,
    },
    poll: {
      intervalMs: pollIntervalMs,
      overlapMs: e.POLL_OVERLAP_MS,
      lookback: e.POLL_LOOKBACK,
      lookbackFloorMs: e.POLL_LOOKBACK_MIN_MS,
      freshnessBoundMs: e.FRESHNESS_BOUND_MS,
      readsPerInterval: (e.UPSTREAM_RATE_LIMIT_RPS * e.UPSTREAM_PAGE_SIZE * pollIntervalMs) / 1000,
      pageSize: e.UPSTREAM_PAGE_SIZE,
    },
    sweep: { intervalMs: e.SWEEP_INTERVAL_MS },
    initialLoadMode: e.INITIAL_LOAD_MODE,
    deletion: { enabled: e.DELETE_DETECTION === 'on', maxFraction: e.DELETE_MAX_FRACTION },
    heartbeat: { intervalMs: e.HEARTBEAT_INTERVAL_MS },
    eventSource: e.EVENT_SOURCE ?? `urn:reviews-bridge:${e.BRIDGE_ACCOUNT}`,
    http: { host: e.HTTP_HOST, port: e.HTTP_PORT },
    admin,
    logLevel: e.LOG_LEVEL,
    lease: { ttlMs: e.LEASE_TTL_MS },
    leadership: { startConcurrency: e.LEADERSHIP_START_CONCURRENCY },
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    privacy,
    fingerprintKeyFile: keyFile,
    fingerprintKekFile: kekFile,
    tracing: tracingConfig(e),
    schemaRegistry: schemaRegistryConfig(e, env),
  };
}

/** The schema registry settings; null without SCHEMA_REGISTRY_URL (the others are then refused by name). */
function schemaRegistryConfig(e: Env, env: Record<string, string | undefined>): SchemaRegistryConfig | null {
  const password = secret(env, 'SCHEMA_REGISTRY_PASSWORD', false);
  if (!e.SCHEMA_REGISTRY_URL) {
    const stray = (['SCHEMA_REGISTRY_USERNAME', 'SCHEMA_REGISTRY_CA_FILE', 'SCHEMA_REGISTRY_PASSWORD'] as const).find(
      (name) => (name === 'SCHEMA_REGISTRY_PASSWORD' ? password !== null : e[name] !== undefined),
    );
    if (stray) throw new ConfigError(stray, 'only used with SCHEMA_REGISTRY_URL');
    if (e.SCHEMA_REGISTRY_WIRE_FORMAT === 'confluent')
      throw new ConfigError('SCHEMA_REGISTRY_WIRE_FORMAT', 'confluent needs SCHEMA_REGISTRY_URL (the schema ids)');
    return null;
  }
  const url = new URL(e.SCHEMA_REGISTRY_URL);
  if (url.username || url.password) {
    throw new ConfigError(
      'SCHEMA_REGISTRY_URL',
      'must not contain credentials (use SCHEMA_REGISTRY_USERNAME and SCHEMA_REGISTRY_PASSWORD_FILE)',
    );
  }
  if ((password === null) !== (e.SCHEMA_REGISTRY_USERNAME === undefined)) {
    const missing = password === null ? 'SCHEMA_REGISTRY_PASSWORD' : 'SCHEMA_REGISTRY_USERNAME';
    throw new ConfigError(missing, 'the registry user and password go together (the password or its _FILE)');
  }
  if (password !== null && url.protocol === 'http:' && !isLoopback(url.hostname)) {
    // Basic auth would cross the network in clear text.
    throw new ConfigError('SCHEMA_REGISTRY_URL', 'must be https:// when the registry needs a password');
  }
  return {
    url: e.SCHEMA_REGISTRY_URL.replace(/\/+$/, ''),
    username: e.SCHEMA_REGISTRY_USERNAME ?? null,
    password,
    caFile: readableFile(e, 'SCHEMA_REGISTRY_CA_FILE'),
    compatibility: e.SCHEMA_REGISTRY_COMPATIBILITY,
    wireFormat: e.SCHEMA_REGISTRY_WIRE_FORMAT,
  };
}

/** The Kafka topic names, {account} replaced, each a valid name and the event topics distinct from the rest. */
function kafkaTopics(e: Env, deployment: string): BridgeConfig['kafka']['topics'] {
  // A name may carry {account}: a topic per account (see "Accounts and topics" in docs/operations.md).
  const topic = (setting: keyof Env & `KAFKA_TOPIC_${string}`): string => {
    const value = e[setting] ?? (setting === 'KAFKA_TOPIC_CHANGELOG' ? defaultChangelogTopic(deployment) : '');
    const name = String(value).replaceAll('{account}', e.BRIDGE_ACCOUNT);
    if (!/^[A-Za-z0-9._-]{1,249}$/.test(name)) {
      throw new ConfigError(setting, 'a Kafka topic name: letters, digits, . _ - only (and {account}), at most 249');
    }
    return name;
  };
  const topics = {
    created: topic('KAFKA_TOPIC_CREATED'),
    statusChanged: topic('KAFKA_TOPIC_STATUS_CHANGED'),
    updated: topic('KAFKA_TOPIC_UPDATED'),
    deadLetter: topic('KAFKA_TOPIC_DEAD_LETTER'),
    state: topic('KAFKA_TOPIC_STATE'),
    deleted: topic('KAFKA_TOPIC_DELETED'),
    heartbeat: topic('KAFKA_TOPIC_HEARTBEAT'),
    changelog: topic('KAFKA_TOPIC_CHANGELOG'),
  };
  const names = Object.values(topics);
  if (new Set(names.slice(0, 4)).size !== 4) {
    throw new ConfigError('KAFKA_TOPIC_DEAD_LETTER', 'the four topic names must be distinct');
  }
  if (new Set(names).size !== names.length) {
    throw new ConfigError(
      'KAFKA_TOPIC_STATE',
      'the state, deleted, heartbeat and changelog topics must differ from the others',
    );
  }
  return topics;
}

/** The changelog topic of a deployment that does not name one: its own, never another deployment's. */
export function defaultChangelogTopic(deployment: string): string {
  return `${FORMER_DEFAULT_CHANGELOG}.${deployment}`;
}

// What tells two installations apart when BRIDGE_DEPLOYMENT_ID is not set: the upstream they mirror, the account
// (one account per deployment), the Kafka client id, the Redis key prefix and the Redis they keep their state in
// (two installations differing only in their Redis are two deployments: each would otherwise take the other's
// transactional id). Several accounts in one deployment leave their accounts and upstreams out: adding one must
// not change the deployment. A Redis credential is never part of it (REDIS_URL refuses a password).
function deploymentParts(e: Env, multiAccount: boolean): string[] {
  const base = [e.KAFKA_CLIENT_ID, e.REDIS_KEY_PREFIX, redisTargetText(e)];
  return multiAccount ? ['accounts', ...base] : [e.UPSTREAM_BASE_URL.replace(/\/+$/, ''), e.BRIDGE_ACCOUNT, ...base];
}

// The Redis a deployment keeps its state in, as text: the server and database of REDIS_URL (no user name), the
// sentinels and master name, or the cluster's seed nodes (sorted: their order is no other Redis).
function redisTargetText(e: Env): string {
  if (e.REDIS_SENTINELS) return `sentinel:${e.REDIS_SENTINEL_NAME ?? ''}@${[...e.REDIS_SENTINELS].sort().join(',')}`;
  if (e.REDIS_CLUSTER_NODES) return `cluster:${[...e.REDIS_CLUSTER_NODES].sort().join(',')}`;
  if (!e.REDIS_URL) return '';
  try {
    const url = new URL(e.REDIS_URL);
    return `${url.protocol}//${url.host}${url.pathname === '/' ? '' : url.pathname}`;
  } catch {
    return e.REDIS_URL;
  }
}

// The client id as text for the upstream id: its value, read once (a file that cannot be read yet counts by its
// path: the credentials check at the first token fetch names the problem).
function clientIdText(source: SecretSource): string {
  try {
    return readSecretSync(source, 'UPSTREAM_CLIENT_ID');
  } catch {
    return 'file' in source ? `file:${source.file}` : 'env' in source ? `env:${source.env}` : '';
  }
}

/** Tracing is on with an OTLP exporter asked for or an endpoint set, unless the SDK is disabled. */
function tracingConfig(e: Env): TracingConfig {
  const endpoint =
    e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ??
    (e.OTEL_EXPORTER_OTLP_ENDPOINT ? `${e.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces` : null);
  const asked = e.OTEL_TRACES_EXPORTER === 'otlp' || (e.OTEL_TRACES_EXPORTER === undefined && endpoint !== null);
  return {
    enabled: asked && !e.OTEL_SDK_DISABLED,
    endpoint,
    serviceName: e.OTEL_SERVICE_NAME,
    scheduleDelayMs: e.OTEL_BSP_SCHEDULE_DELAY,
  };
}

type Env = z.infer<typeof EnvSchema>;

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '[::1]' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

// Where a generated key may live: wrapped in the changelog (a KEK), or in Redis alone by explicit choice; never
// by default, since the default once copied it in plain form to a topic.
function fingerprintKekFile(e: Env): string | null {
  const file = readableFile(e, 'FINGERPRINT_KEK_FILE');
  if (e.FINGERPRINT_KEY_FILE !== undefined) {
    if (file !== null)
      throw new ConfigError('FINGERPRINT_KEK_FILE', 'only without FINGERPRINT_KEY_FILE (no key is generated)');
    if (e.FINGERPRINT_KEY_GENERATE)
      throw new ConfigError('FINGERPRINT_KEY_GENERATE', 'only without FINGERPRINT_KEY_FILE (no key is generated)');
    return null;
  }
  if (file !== null && readSecretSync({ file }, 'FINGERPRINT_KEK_FILE').length < 32) {
    throw new ConfigError('FINGERPRINT_KEK_FILE', 'the key-encryption key must be at least 32 bytes long');
  }
  if (file === null && !e.FINGERPRINT_KEY_GENERATE) {
    throw new ConfigError(
      'FINGERPRINT_KEY_FILE',
      'required: set it (recommended), or FINGERPRINT_KEK_FILE to keep a generated key wrapped in the changelog, or FINGERPRINT_KEY_GENERATE=true to keep a generated key in Redis only',
    );
  }
  return file;
}

function fingerprintKeyFile(e: Env): string | null {
  const file = readableFile(e, 'FINGERPRINT_KEY_FILE');
  if (file !== null && readSecretSync({ file }, 'FINGERPRINT_KEY_FILE').length < 16) {
    throw new ConfigError('FINGERPRINT_KEY_FILE', 'the key must be at least 16 bytes long');
  }
  return file;
}

function adminConfig(e: Env): AdminConfig | null {
  if (e.ADMIN_PORT === undefined) {
    const stray = (['ADMIN_TOKEN_FILE', 'ADMIN_TLS_CERT_FILE', 'ADMIN_TLS_KEY_FILE', 'ADMIN_HOST'] as const).find(
      (name) => e[name] !== undefined,
    );
    if (stray) throw new ConfigError('ADMIN_PORT', `required when ${stray} is set (the admin API is off without it)`);
    return null;
  }
  if (e.ADMIN_PORT !== 0 && e.ADMIN_PORT === e.HTTP_PORT) {
    throw new ConfigError('ADMIN_PORT', 'must differ from HTTP_PORT (the admin API has its own port)');
  }
  if (!e.ADMIN_TOKEN_FILE) throw new ConfigError('ADMIN_TOKEN_FILE', 'required when ADMIN_PORT is set');
  let text: string;
  try {
    text = readFileSync(e.ADMIN_TOKEN_FILE, 'utf8');
  } catch {
    throw new ConfigError('ADMIN_TOKEN_FILE', 'file cannot be read');
  }
  try {
    parseTokenFile(text);
  } catch (err) {
    if (err instanceof TokenFileError) throw new ConfigError('ADMIN_TOKEN_FILE', err.message);
    throw err;
  }
  const certFile = readableFile(e, 'ADMIN_TLS_CERT_FILE');
  const keyFile = readableFile(e, 'ADMIN_TLS_KEY_FILE');
  if ((certFile === null) !== (keyFile === null)) {
    throw new ConfigError(
      certFile ? 'ADMIN_TLS_KEY_FILE' : 'ADMIN_TLS_CERT_FILE',
      `required with ${certFile ? 'ADMIN_TLS_CERT_FILE' : 'ADMIN_TLS_KEY_FILE'}`,
    );
  }
  return {
    host: e.ADMIN_HOST ?? e.HTTP_HOST,
    port: e.ADMIN_PORT,
    tokenFile: e.ADMIN_TOKEN_FILE,
    tls: certFile && keyFile ? { certFile, keyFile } : null,
  };
}

function readableFile(e: Env, setting: keyof Env): string | null {
  const file = e[setting];
  if (typeof file !== 'string') return null;
  try {
    readSecretSync({ file }, setting);
  } catch {
    throw new ConfigError(setting, 'file cannot be read or is empty');
  }
  return file;
}

function tlsFiles(e: Env, prefix: 'KAFKA_SSL' | 'REDIS_TLS'): TlsFiles {
  const files = {
    caFile: readableFile(e, `${prefix}_CA_FILE`),
    certFile: readableFile(e, `${prefix}_CERT_FILE`),
    keyFile: readableFile(e, `${prefix}_KEY_FILE`),
  };
  if ((files.certFile === null) !== (files.keyFile === null)) {
    throw new ConfigError(
      `${prefix}_${files.certFile ? 'KEY' : 'CERT'}_FILE`,
      `required with ${prefix}_${files.certFile ? 'CERT' : 'KEY'}_FILE`,
    );
  }
  return files;
}

function privacyConfig(e: Env): PrivacyConfig {
  let fields: FieldPolicySpec;
  try {
    fields = parseFieldPolicySpec(e);
  } catch (err) {
    if (err instanceof FieldPolicySpecError) throw new ConfigError(err.setting, err.message);
    throw err;
  }
  let hashKey: SecretSource | null = null;
  if (e.EVENT_HASH_KEY_FILE) {
    let key: string;
    try {
      key = readSecretSync({ file: e.EVENT_HASH_KEY_FILE }, 'event hash key');
    } catch {
      throw new ConfigError('EVENT_HASH_KEY_FILE', 'file cannot be read or is empty');
    }
    // A short key could be found by trying every candidate, and the tokens of known e-mail addresses with it.
    if (Buffer.byteLength(key) < 32)
      throw new ConfigError('EVENT_HASH_KEY_FILE', 'the key must have at least 32 bytes');
    hashKey = { file: e.EVENT_HASH_KEY_FILE };
  }
  if (fields.hash.length > 0 && !hashKey) {
    throw new ConfigError('EVENT_HASH_KEY_FILE', 'required when EVENT_FIELDS_HASH is set');
  }
  return { fields, hashKey, deadLetterPayload: e.DEAD_LETTER_PAYLOAD };
}

const REDIS_TARGETS = ['REDIS_URL', 'REDIS_SENTINELS', 'REDIS_CLUSTER_NODES'] as const;

// One answer to "TLS to Redis?" whatever the topology: the URL's scheme for a single Redis (REDIS_TLS may only
// agree with it), REDIS_TLS for Sentinel and Cluster; certificate files without TLS are a mistake, not a no-op.
function redisTlsSwitch(e: Env, url: URL | null, files: TlsFiles): boolean {
  const filesSet = Object.values(files).some((f) => f !== null);
  if (url) {
    const rediss = url.protocol === 'rediss:';
    if (e.REDIS_TLS === true && !rediss) throw new ConfigError('REDIS_TLS', 'true needs a rediss:// REDIS_URL');
    if (e.REDIS_TLS === false && rediss)
      throw new ConfigError('REDIS_TLS', 'false contradicts the rediss:// REDIS_URL');
    if (filesSet && !rediss) throw new ConfigError('REDIS_URL', 'must be rediss:// when REDIS_TLS_* files are set');
    return rediss;
  }
  if (filesSet && e.REDIS_TLS !== true) {
    throw new ConfigError('REDIS_TLS', 'must be true when REDIS_TLS_* files are set (Sentinel or Cluster)');
  }
  return e.REDIS_TLS === true;
}

function redisTarget(e: z.infer<typeof EnvSchema>): RedisTarget {
  const set = REDIS_TARGETS.filter((name) => e[name] !== undefined);
  if (set.length === 0) throw new ConfigError('REDIS_URL', `required (or REDIS_SENTINELS or REDIS_CLUSTER_NODES)`);
  if (set.length > 1) throw new ConfigError(set[1]!, `set only one of ${set.join(', ')}`);
  const hostPort = (b: string): HostPort => {
    const at = b.lastIndexOf(':');
    return { host: b.slice(0, at), port: Number(b.slice(at + 1)) };
  };
  if (e.REDIS_SENTINELS) {
    if (!e.REDIS_SENTINEL_NAME) throw new ConfigError('REDIS_SENTINEL_NAME', 'required when REDIS_SENTINELS is set');
    return { kind: 'sentinel', sentinels: e.REDIS_SENTINELS.map(hostPort), name: e.REDIS_SENTINEL_NAME };
  }
  if (e.REDIS_SENTINEL_NAME) throw new ConfigError('REDIS_SENTINEL_NAME', 'only used with REDIS_SENTINELS');
  if (e.REDIS_CLUSTER_NODES) return { kind: 'cluster', nodes: e.REDIS_CLUSTER_NODES.map(hostPort) };
  return { kind: 'standalone', url: e.REDIS_URL! };
}
