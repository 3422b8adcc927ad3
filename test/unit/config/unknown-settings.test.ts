import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ENV_VARS } from '../../../src/config/config.js';
import { settingPrefixes, unknownSettingMessage, unknownSettings } from '../../../src/config/unknown-settings.js';

// Issue 50 item 5: a mistyped setting's name is said at start with the setting it most likely meant.

describe('unknownSettings', () => {
  it('names the setting a typo meant', () => {
    const found = unknownSettings({
      KAFKA_BROKER: 'x',
      POLL_INTERVAL: '5000',
      REDIS_ULR: 'redis://r',
      SWEEP_EVERY: '1',
    });
    expect(found).toEqual([
      { name: 'KAFKA_BROKER', meant: 'KAFKA_BROKERS' },
      { name: 'POLL_INTERVAL', meant: 'POLL_INTERVAL_MS' },
      { name: 'REDIS_ULR', meant: 'REDIS_URL' },
      { name: 'SWEEP_EVERY', meant: null },
    ]);
    expect(unknownSettingMessage(found[0]!)).toBe(
      'KAFKA_BROKER is not a setting of the bridge and is ignored (did you mean KAFKA_BROKERS?)',
    );
    expect(unknownSettingMessage(found[3]!)).toBe('SWEEP_EVERY is not a setting of the bridge and is ignored');
  });

  it('the prefixes come from the settings, and leave out what other software owns', () => {
    const prefixes = settingPrefixes();
    for (const p of ['KAFKA', 'REDIS', 'UPSTREAM', 'POLL', 'SWEEP']) expect(prefixes.has(p)).toBe(true);
    expect(prefixes.has('OTEL')).toBe(false);
    expect(prefixes.has('NODE')).toBe(false);
  });

  it('leaves alone the settings, other prefixes, OTEL_*, NODE_*, NO_COLOR and Kubernetes service links', () => {
    const env = {
      ...Object.fromEntries(ENV_VARS.map((n) => [n, 'x'])),
      OTEL_RESOURCE_ATTRIBUTES: 'a=b',
      NODE_OPTIONS: '--enable-source-maps',
      NO_COLOR: '1',
      KAFKAJS_NO_PARTITIONER_WARNING: '1',
      REDIS_SERVICE_HOST: '10.0.0.1',
      REDIS_SERVICE_PORT_REDIS: '6379',
      KAFKA_PORT: 'tcp://10.0.0.2:9092',
      KAFKA_PORT_9092_TCP_ADDR: '10.0.0.2',
      PATH: '/bin',
      kafka_brokers: 'lower case: not ours',
    };
    expect(unknownSettings(env)).toEqual([]);
  });

  it('property: every name it reports is under a prefix of the bridge and not a setting', () => {
    const prefixes = [...settingPrefixes()];
    fc.assert(
      fc.property(fc.constantFrom(...prefixes), fc.stringMatching(/^[A-Z0-9_]{1,12}$/), (prefix, rest) => {
        const name = `${prefix}_${rest}`;
        for (const found of unknownSettings({ [name]: '1' })) {
          expect(found.name).toBe(name);
          expect(ENV_VARS).not.toContain(name);
          if (found.meant !== null) expect(ENV_VARS).toContain(found.meant);
        }
      }),
      { numRuns: 300 },
    );
  });
});
