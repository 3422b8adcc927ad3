import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ENV_VARS, loadConfig } from '../../../src/config/config.js';
import { errorOf, MINIMAL_ENV } from '../../helpers/config.js';
import { readSecretSync as readSecret } from '../../../src/config/secrets.js';

const minimal = MINIMAL_ENV;

describe('loadConfig', () => {
  it('gives every deployment its own changelog topic and transactional id unless they are set', () => {
    // Two deployments that keep the defaults (another account, or another Redis prefix) on one Kafka cluster must
    // neither read each other's changelog nor fence each other's producers.
    const a = loadConfig(minimal);
    const b = loadConfig({ ...minimal, BRIDGE_ACCOUNT: 'other' });
    const c = loadConfig({ ...minimal, REDIS_KEY_PREFIX: 'staging' });
    const ids = [a, b, c].map((x) => x.kafka.identity!.deployment);
    expect(new Set(ids).size).toBe(3);
    expect(new Set([a, b, c].map((x) => x.kafka.topics.changelog)).size).toBe(3);
    expect(new Set([a, b, c].map((x) => x.kafka.transactionalId)).size).toBe(3);
    // Stable: the same settings give the same ids (a restart is the same deployment).
    expect(loadConfig(minimal).kafka.identity).toEqual(a.kafka.identity);
    expect(a.kafka.changelogDefaulted).toBe(true);
    // Pinned by the operator, or set explicitly: as given.
    const pinned = loadConfig({ ...minimal, BRIDGE_DEPLOYMENT_ID: 'prod-eu', KAFKA_TOPIC_CHANGELOG: 'my.changelog' });
    expect(pinned.kafka.identity!.deployment).toBe('prod-eu');
    expect(pinned.kafka.topics.changelog).toBe('my.changelog');
    expect(pinned.kafka.changelogDefaulted).toBe(false);
    expect(pinned.kafka.transactionalId).toBe('reviews-bridge.prod-eu.default');
    expect(loadConfig({ ...minimal, KAFKA_TRANSACTIONAL_ID_PREFIX: 'tx' }).kafka.transactionalId).toBe('tx.default');
    expect(() => loadConfig({ ...minimal, BRIDGE_DEPLOYMENT_ID: 'a b' })).toThrow(/BRIDGE_DEPLOYMENT_ID/);
    // The upstream id: another API client is another upstream; never the client id itself.
    const other = loadConfig({ ...minimal, UPSTREAM_CLIENT_ID: 'someone-else' });
    expect(other.kafka.identity!.upstream).not.toBe(a.kafka.identity!.upstream);
    expect(JSON.stringify(a.kafka.identity)).not.toContain(String(minimal.UPSTREAM_CLIENT_ID));
  });

  it('derives another deployment id for another Redis, one account or several, never from a credential', () => {
    // Two installations with the same settings but their own Redis are two deployments: with one id they would
    // share the default changelog topic and take each other's transactional id (issue 46, item 4).
    const one = (env: Record<string, string>) => loadConfig({ ...minimal, ...env }).kafka.identity!.deployment;
    const many = (env: Record<string, string>) =>
      loadConfig({ ...minimal, ...env }, { multiAccount: true }).kafka.identity!.deployment;
    for (const id of [one, many]) {
      const base = id({});
      expect(id({ REDIS_URL: 'redis://127.0.0.1:6380' })).not.toBe(base);
      expect(id({ REDIS_URL: 'redis://127.0.0.1:6379/2' })).not.toBe(base);
      expect(id({ REDIS_URL: 'redis://redis-b.example:6379' })).not.toBe(base);
      const sentinels = { REDIS_URL: '', REDIS_SENTINELS: 'a:26379,b:26379', REDIS_SENTINEL_NAME: 'm' };
      expect(id(sentinels)).not.toBe(id({ ...sentinels, REDIS_SENTINEL_NAME: 'other' }));
      // The order of the seed addresses names no other Redis; the user name and the password file are no part.
      expect(id(sentinels)).toBe(id({ ...sentinels, REDIS_SENTINELS: 'b:26379,a:26379' }));
      const nodes = { REDIS_URL: '', REDIS_CLUSTER_NODES: 'a:7000,b:7000' };
      expect(id(nodes)).toBe(id({ ...nodes, REDIS_CLUSTER_NODES: 'b:7000,a:7000' }));
      expect(id(nodes)).not.toBe(id({ ...nodes, REDIS_CLUSTER_NODES: 'a:7000,c:7000' }));
      expect(id({ REDIS_URL: 'redis://bridge@127.0.0.1:6379' })).toBe(base);
      // Pinned, it is what the operator says whatever the Redis.
      expect(id({ BRIDGE_DEPLOYMENT_ID: 'prod', REDIS_URL: 'redis://elsewhere:6379' })).toBe('prod');
    }
  });

  it('applies defaults', () => {
    const c = loadConfig(minimal);
    expect(c.account).toBe('default');
    expect(c.upstream.rateLimitRps).toBe(9.6);
    expect(c.upstream.rateLimitBurst).toBe(1.3);
    // One poll interval, whatever else runs; the deprecated POLL_MIN_INTERVAL_MS stands in only when it is unset.
    expect(c.poll).toEqual({
      intervalMs: 1_000,
      overlapMs: 300_000,
      lookback: 'learned',
      lookbackFloorMs: 1_000,
      freshnessBoundMs: 30_000,
      readsPerInterval: 960,
      // The upstream's page size, which prices the trailing tiers' shares of the budget.
      pageSize: 100,
    });
    expect(loadConfig({ ...minimal, POLL_MIN_INTERVAL_MS: '2000' }).poll.intervalMs).toBe(2_000);
    expect(loadConfig({ ...minimal, POLL_INTERVAL_MS: '500', POLL_MIN_INTERVAL_MS: '2000' }).poll.intervalMs).toBe(500);
    expect(c.upstream.pageSize).toBe(100);
    expect(c.kafka.topics).toEqual({
      created: 'review.created',
      statusChanged: 'review.status_changed',
      updated: 'review.updated',
      deadLetter: 'review.dead_letter',
      state: 'review.state',
      deleted: 'review.deleted',
      heartbeat: 'review.heartbeat',
      changelog: `reviews-bridge.changelog.${c.kafka.identity!.deployment}`,
    });
    // Exactly-once by default, with a transactional id stable per deployment and account.
    expect(c.kafka.exactlyOnce).toBe(true);
    expect(c.kafka.transactionalId).toBe(`reviews-bridge.${c.kafka.identity!.deployment}.default`);
    expect(loadConfig({ ...minimal, KAFKA_EXACTLY_ONCE: 'off' }).kafka.exactlyOnce).toBe(false);
    expect(c.fingerprintKeyFile).toBeNull();
    expect(c.kafka.brokers).toEqual(['127.0.0.1:9092']);
    expect(c.eventSource).toBe('urn:reviews-bridge:default');
    expect(c.initialLoadMode).toBe('mark');
    expect(c.upstream.maxFutureSkewMs).toBe(86_400_000);
    expect(c.upstream.maxRecordBytes).toBe(1024 * 1024);
    expect(c.upstream.maxStringLength).toBe(65_536);
    expect(c.kafka.maxMessageBytes).toBe(1024 * 1024);
    expect(c.kafka.topics).toMatchObject({
      state: 'review.state',
      deleted: 'review.deleted',
      heartbeat: 'review.heartbeat',
    });
    expect(c.deletion).toEqual({ enabled: true, maxFraction: 0.01 });
    expect(c.heartbeat).toEqual({ intervalMs: 60_000 });
  });

  it('reads the consumer-facing settings', () => {
    const c = loadConfig({
      ...minimal,
      DELETE_DETECTION: 'off',
      DELETE_MAX_FRACTION: '0.2',
      HEARTBEAT_INTERVAL_MS: '5000',
    });
    expect(c.deletion).toEqual({ enabled: false, maxFraction: 0.2 });
    expect(c.heartbeat.intervalMs).toBe(5000);
  });

  it.each([
    [{ UPSTREAM_BASE_URL: undefined }, 'UPSTREAM_BASE_URL', 'required'],
    [{ UPSTREAM_BASE_URL: 'ftp://x' }, 'UPSTREAM_BASE_URL', ''],
    [{ KAFKA_BROKERS: 'nohostport' }, 'KAFKA_BROKERS', 'host:port'],
    [{ UPSTREAM_PAGE_SIZE: '101' }, 'UPSTREAM_PAGE_SIZE', ''],
    [{ UPSTREAM_RATE_LIMIT_RPS: '-1' }, 'UPSTREAM_RATE_LIMIT_RPS', ''],
    [{ REDIS_URL: 'localhost:6379' }, 'REDIS_URL', 'redis://'],
    [{ INITIAL_LOAD_MODE: 'skip' }, 'INITIAL_LOAD_MODE', ''],
    [{ UPSTREAM_CLIENT_SECRET: undefined }, 'UPSTREAM_CLIENT_SECRET', 'required'],
    [
      { UPSTREAM_CLIENT_SECRET_FILE: '/nonexistent/secret', UPSTREAM_CLIENT_SECRET: undefined },
      'UPSTREAM_CLIENT_SECRET_FILE',
      'cannot be read',
    ],
    [{ POLL_INTERVAL_MS: '10000', POLL_OVERLAP_MS: '5000' }, 'POLL_OVERLAP_MS', 'POLL_INTERVAL_MS'],
    [{ KAFKA_TOPIC_UPDATED: 'review.created' }, 'KAFKA_TOPIC_DEAD_LETTER', 'distinct'],
    [{ BRIDGE_ACCOUNT: 'a b' }, 'BRIDGE_ACCOUNT', ''],
    [{ UPSTREAM_MAX_FUTURE_SKEW_MS: '-1' }, 'UPSTREAM_MAX_FUTURE_SKEW_MS', ''],
    [{ UPSTREAM_MAX_FUTURE_SKEW_MS: 'a day' }, 'UPSTREAM_MAX_FUTURE_SKEW_MS', ''],
    [{ UPSTREAM_MAX_FUTURE_SKEW_MS: String(31 * 86_400_000) }, 'UPSTREAM_MAX_FUTURE_SKEW_MS', ''],
    [{ UPSTREAM_MAX_RECORD_BYTES: '10' }, 'UPSTREAM_MAX_RECORD_BYTES', ''],
    [{ UPSTREAM_MAX_STRING_LENGTH: '0' }, 'UPSTREAM_MAX_STRING_LENGTH', ''],
    [{ KAFKA_MAX_MESSAGE_BYTES: '100' }, 'KAFKA_MAX_MESSAGE_BYTES', ''],
    [{ UPSTREAM_BASE_URL: 'http://reviews.example.com' }, 'UPSTREAM_BASE_URL', 'UPSTREAM_ALLOW_INSECURE'],
    [{ UPSTREAM_BASE_URL: 'https://u:p@reviews.example.com' }, 'UPSTREAM_BASE_URL', 'credentials'],
    [{ UPSTREAM_CA_FILE: '/nonexistent/ca.pem' }, 'UPSTREAM_CA_FILE', 'cannot be read'],
    [
      { KAFKA_SASL_MECHANISM: 'plain', KAFKA_SASL_USERNAME: 'u', KAFKA_SASL_PASSWORD: 'p' },
      'KAFKA_SASL_MECHANISM',
      'KAFKA_SASL_ALLOW_PLAINTEXT',
    ],
    [{ KAFKA_SSL_CERT_FILE: '/etc/hostname' }, 'KAFKA_SSL_KEY_FILE', 'KAFKA_SSL_CERT_FILE'],
    [{ REDIS_URL: 'redis://:hunter2@127.0.0.1:6379' }, 'REDIS_URL', 'REDIS_PASSWORD_FILE'],
    [{ REDIS_TLS_CA_FILE: '/etc/hostname' }, 'REDIS_URL', 'rediss://'],
    [{ REDIS_PASSWORD_FILE: '/nonexistent/pw' }, 'REDIS_PASSWORD_FILE', 'cannot be read'],
    [{ EVENT_FIELDS_HASH: 'nickname' }, 'EVENT_HASH_KEY_FILE', 'required'],
    [{ EVENT_FIELDS_EXCLUDE: 'id' }, 'EVENT_FIELDS_EXCLUDE', 'required'],
    [{ EVENT_HASH_KEY_FILE: '/etc/hostname' }, 'EVENT_HASH_KEY_FILE', '32 bytes'],
    [{ DEAD_LETTER_PAYLOAD: 'everything' }, 'DEAD_LETTER_PAYLOAD', ''],
    [{ KAFKA_TOPIC_STATE: 'review.created' }, 'KAFKA_TOPIC_STATE', 'differ'],
    [{ DELETE_DETECTION: 'maybe' }, 'DELETE_DETECTION', ''],
    [{ DELETE_MAX_FRACTION: '1.5' }, 'DELETE_MAX_FRACTION', ''],
    [{ HEARTBEAT_INTERVAL_MS: '10' }, 'HEARTBEAT_INTERVAL_MS', ''],
    [{ REDIS_URL: undefined }, 'REDIS_URL', 'REDIS_SENTINELS or REDIS_CLUSTER_NODES'],
    [{ REDIS_CLUSTER_NODES: 'a:7000' }, 'REDIS_CLUSTER_NODES', 'only one of REDIS_URL, REDIS_CLUSTER_NODES'],
    [
      { REDIS_URL: undefined, REDIS_SENTINELS: 's:26379', REDIS_SENTINEL_NAME: 'm', REDIS_CLUSTER_NODES: 'a:7000' },
      'REDIS_CLUSTER_NODES',
      'only one of REDIS_SENTINELS, REDIS_CLUSTER_NODES',
    ],
    [{ REDIS_URL: undefined, REDIS_SENTINELS: 's:26379' }, 'REDIS_SENTINEL_NAME', 'required when REDIS_SENTINELS'],
    [{ REDIS_SENTINEL_NAME: 'm' }, 'REDIS_SENTINEL_NAME', 'only used with REDIS_SENTINELS'],
    [{ REDIS_URL: undefined, REDIS_SENTINELS: 'nohostport', REDIS_SENTINEL_NAME: 'm' }, 'REDIS_SENTINELS', 'host:port'],
    [{ REDIS_URL: undefined, REDIS_CLUSTER_NODES: 'a:7000,b' }, 'REDIS_CLUSTER_NODES', 'host:port'],
    [{ REDIS_WAIT_REPLICAS: '-1' }, 'REDIS_WAIT_REPLICAS', ''],
  ])('rejects %o naming %s', (override, setting, fragment) => {
    const env = { ...minimal, ...override } as Record<string, string>;
    for (const [k, v] of Object.entries(override)) if (v === undefined) delete env[k];
    const err = errorOf(env);
    expect(err.setting).toBe(setting);
    expect(err.message).toContain(setting);
    expect(err.message).toContain(fragment);
    // A rule that reads a setting the schema refused is not reported on top of it.
    expect(err.problems).toHaveLength(1);
  });

  it('reports every bad setting at once, one line each naming it, and never a value', () => {
    const { UPSTREAM_CLIENT_SECRET: _, ...noSecret } = minimal;
    const err = errorOf({
      ...noSecret,
      UPSTREAM_BASE_URL: 'ftp://reviews.example.com',
      KAFKA_BROKERS: 'broker-without-port',
      UPSTREAM_PAGE_SIZE: '500',
      POLL_INTERVAL_MS: '10000',
      POLL_OVERLAP_MS: '5000',
      REDIS_PASSWORD: 'hunter2-value',
      REDIS_PASSWORD_FILE: '/nonexistent/pw',
    });
    expect(err.problems.map((p) => p.setting)).toEqual([
      'UPSTREAM_BASE_URL',
      'UPSTREAM_PAGE_SIZE',
      'KAFKA_BROKERS',
      'UPSTREAM_CLIENT_SECRET',
      'REDIS_PASSWORD',
      'POLL_OVERLAP_MS',
    ]);
    const lines = err.message.split('\n');
    expect(lines).toHaveLength(6);
    for (const [i, line] of lines.entries()) {
      expect(line).toMatch(new RegExp(`^invalid configuration: ${err.problems[i]!.setting}: \\S`));
    }
    expect(lines[0]).toBe('invalid configuration: UPSTREAM_BASE_URL: wrong URL scheme ftp://: use http:// or https://');
    expect(err.message).not.toMatch(/hunter2|s3cret|broker-without-port|reviews\.example/);
    expect(err.setting).toBe('UPSTREAM_BASE_URL');
  });

  it('skips a rule that needs the result of a rule that failed', () => {
    // TLS was asked for (a certificate) but is incomplete: that is the problem, not SASL plain without TLS.
    const err = errorOf({
      ...minimal,
      KAFKA_SSL_CERT_FILE: '/etc/hostname',
      KAFKA_SASL_MECHANISM: 'plain',
      KAFKA_SASL_USERNAME: 'u',
      KAFKA_SASL_PASSWORD: 'p',
    });
    expect(err.problems).toEqual([{ setting: 'KAFKA_SSL_KEY_FILE', problem: 'required with KAFKA_SSL_CERT_FILE' }]);
  });

  it.each([
    ['UPSTREAM_BASE_URL', 'ftp://h', 'wrong URL scheme ftp://: use http:// or https://'],
    ['UPSTREAM_BASE_URL', 'reviews.example.com', 'not a URL: it needs a scheme, http:// or https://'],
    ['UPSTREAM_BASE_URL', 'https://', 'not a valid https:// URL'],
    ['REDIS_URL', 'redis://', 'not a URL: no host after redis://'],
    ['REDIS_URL', 'http://127.0.0.1:6379', 'wrong URL scheme http://: use redis:// or rediss://'],
    ['REDIS_URL', 'localhost:6379', 'not a URL: it needs a scheme, redis:// or rediss://'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'grpc://collector:4317', 'wrong URL scheme grpc://: use http:// or https://'],
  ])('names a wrong URL scheme as such: %s=%s', (setting, value, problem) => {
    expect(errorOf({ ...minimal, [setting]: value }).problems).toEqual([{ setting, problem }]);
  });

  describe('Redis topology', () => {
    const without = (env: Record<string, string | undefined>) => {
      const { REDIS_URL: _, ...rest } = { ...minimal, ...env };
      return rest as Record<string, string>;
    };

    it('takes a single server, a Sentinel-monitored primary or a Redis Cluster', () => {
      expect(loadConfig(minimal).redis).toMatchObject({
        target: { kind: 'standalone', url: 'redis://127.0.0.1:6379' },
        waitReplicas: 0,
      });
      expect(
        loadConfig(without({ REDIS_SENTINELS: '10.0.0.1:26379, s2:26380', REDIS_SENTINEL_NAME: 'bridge' })).redis,
      ).toMatchObject({
        target: {
          kind: 'sentinel',
          name: 'bridge',
          sentinels: [
            { host: '10.0.0.1', port: 26379 },
            { host: 's2', port: 26380 },
          ],
        },
        // No replica wait by default on any topology: a failover that loses commits costs a restore from Kafka.
        waitReplicas: 0,
        waitTimeoutMs: 1_000,
      });
      expect(
        loadConfig(without({ REDIS_CLUSTER_NODES: 'a:7000,b:7001', REDIS_WAIT_REPLICAS: '2' })).redis,
      ).toMatchObject({
        target: {
          kind: 'cluster',
          nodes: [
            { host: 'a', port: 7000 },
            { host: 'b', port: 7001 },
          ],
        },
        waitReplicas: 2,
      });
      // An empty setting (KEY= in a manifest) counts as unset.
      expect(loadConfig({ ...minimal, REDIS_CLUSTER_NODES: '' }).redis.target.kind).toBe('standalone');
    });
  });

  it('never echoes a secret in its error', () => {
    const err = errorOf({ ...minimal, UPSTREAM_CLIENT_SECRET_FILE: '/x' });
    expect(err.message).not.toContain('s3cret-value');
  });

  it('re-reads a file secret on every use, so rotation needs no restart', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-'));
    const file = join(dir, 'secret');
    writeFileSync(file, 'first\n');
    const c = loadConfig({ ...minimal, UPSTREAM_CLIENT_SECRET: undefined, UPSTREAM_CLIENT_SECRET_FILE: file });
    expect(readSecret(c.upstream.clientSecret, 'secret')).toBe('first');
    writeFileSync(file, 'second\n');
    expect(readSecret(c.upstream.clientSecret, 'secret')).toBe('second');
  });

  it('protects personal data and transport by default', () => {
    const c = loadConfig(minimal);
    expect(c.privacy.fields.allowRawEmail).toBe(false);
    expect(c.privacy.hashKey).toBeNull();
    expect(c.privacy.deadLetterPayload).toBe('masked');
    expect(c.kafka.ssl).toBe(false);
    const plain = { KAFKA_SASL_MECHANISM: 'plain', KAFKA_SASL_USERNAME: 'u', KAFKA_SASL_PASSWORD: 'p' };
    expect(loadConfig({ ...minimal, ...plain, KAFKA_SSL: 'true' }).kafka.sasl?.mechanism).toBe('plain');
    expect(loadConfig({ ...minimal, ...plain, KAFKA_SASL_ALLOW_PLAINTEXT: 'true' }).kafka.ssl).toBe(false);
    // A CA file alone turns TLS on; loopback upstreams may stay on http.
    expect(loadConfig({ ...minimal, KAFKA_SSL_CA_FILE: '/etc/hostname' }).kafka.ssl).toBe(true);
    expect(loadConfig({ ...minimal, UPSTREAM_BASE_URL: 'http://localhost:8080' }).upstream.baseUrl).toBe(
      'http://localhost:8080',
    );
  });

  it('lists every variable it reads', () => {
    expect(ENV_VARS).toContain('UPSTREAM_CLIENT_SECRET_FILE');
    expect(ENV_VARS).toContain('KAFKA_BROKERS');
  });
});

describe('tracing settings (OTEL_*)', () => {
  const tracing = (env: Record<string, string>) => loadConfig({ ...minimal, ...env }).tracing;

  it('off by default; on with an OTLP endpoint or OTEL_TRACES_EXPORTER=otlp; OTEL_SDK_DISABLED wins', () => {
    expect(tracing({})).toEqual({
      enabled: false,
      endpoint: null,
      serviceName: 'reviews-bridge',
      scheduleDelayMs: 5_000,
    });
    expect(tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })).toMatchObject({
      enabled: true,
      endpoint: 'http://collector:4318/v1/traces',
    });
    expect(
      tracing({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://other:4318/traces',
      }),
    ).toMatchObject({ enabled: true, endpoint: 'http://other:4318/traces' });
    expect(tracing({ OTEL_TRACES_EXPORTER: 'otlp' })).toMatchObject({ enabled: true, endpoint: null });
    expect(tracing({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }).enabled).toBe(false);
    expect(tracing({ OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'otlp' }).enabled).toBe(false);
    expect(tracing({ OTEL_SERVICE_NAME: 'bridge-eu' }).serviceName).toBe('bridge-eu');
  });

  it('refuses an endpoint that is not a URL, and an exporter it does not have', () => {
    expect(errorOf({ ...minimal, OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318 x' }).message).toMatch(
      /OTEL_EXPORTER_OTLP_ENDPOINT/,
    );
    expect(errorOf({ ...minimal, OTEL_TRACES_EXPORTER: 'zipkin' }).message).toMatch(/OTEL_TRACES_EXPORTER/);
  });
});
