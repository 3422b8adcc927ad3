import { describe, expect, it } from 'vitest';
import { DependencyMonitor } from '../../../src/app/dependencies.js';
import { capturedLogger } from '../../helpers/bridge.js';

// The dependency monitor: a failing check is logged once (warn, naming the settings), however often it is checked
// or a pass fails on it; recovery once (info); the gauge and the reports say the same.

const refused = () =>
  Object.assign(new Error('Connection error: connect ECONNREFUSED 127.0.0.1:1'), {
    name: 'KafkaJSConnectionError',
    code: 'ECONNREFUSED',
  });

describe('DependencyMonitor', () => {
  it('logs a failure once per change of state, explains the passes failing on it, and recovers', async () => {
    const { logger, lines } = capturedLogger('debug');
    let now = 1_000;
    let up = false;
    const monitor = new DependencyMonitor({ logger, now: () => now });
    monitor.register('kafka', { check: async () => (up ? undefined : Promise.reject(refused())) });
    expect(monitor.reports()).toEqual({ kafka: { status: 'unknown' } });
    expect(monitor.ready()).toBe(false);
    for (let i = 0; i < 5; i++) {
      now += 2_000;
      await monitor.check('kafka');
    }
    // A pass failing on Kafka is explained (the caller logs it at debug); an error of no dependency is not.
    expect(await monitor.explains(Object.assign(new Error('x'), { name: 'KafkaJSNumberOfRetriesExceeded' }))).toBe(
      true,
    );
    expect(await monitor.explains(new Error('plain'))).toBe(false);
    const warned = lines.filter((l) => (l.level as number) >= 40);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ dependency: 'kafka', reason: 'unreachable', check: ['KAFKA_BROKERS'] });
    expect(String(warned[0]!.msg)).toContain('KAFKA_BROKERS');
    expect(monitor.reports().kafka).toMatchObject({
      status: 'failing',
      reason: 'unreachable',
      since: new Date(3_000).toISOString(),
    });
    expect(await monitor.registry.metrics()).toMatch(
      /reviews_bridge_dependency_failing\{dependency="kafka",reason="unreachable"\} 1/,
    );

    up = true;
    now += 2_000;
    await monitor.check('kafka');
    expect(monitor.ready()).toBe(true);
    expect(lines.filter((l) => l.msg === 'kafka ok again')).toHaveLength(1);
    const metrics = await monitor.registry.metrics();
    expect(metrics).toMatch(/reviews_bridge_dependency_failing\{dependency="kafka",reason="none"\} 0/);
    expect(metrics).not.toMatch(/reason="unreachable"/);
  });

  it('a check that hangs fails as a timeout, explained by the client last error when it has one', async () => {
    const { logger } = capturedLogger('debug');
    const monitor = new DependencyMonitor({ logger, timeoutMs: 20 });
    monitor.register('redis', {
      check: () => new Promise(() => undefined),
      lastError: () => Object.assign(new Error('WRONGPASS invalid username-password pair'), { name: 'ReplyError' }),
    });
    monitor.register('upstream', { check: () => new Promise(() => undefined), gatesReadiness: false });
    expect((await monitor.check('redis'))?.status).toBe('failing');
    expect(monitor.reports().redis).toMatchObject({ reason: 'auth_failed' });
    expect(monitor.reports().redis!.settings).toEqual(
      expect.arrayContaining(['REDIS_USERNAME', 'REDIS_PASSWORD_FILE']),
    );
    await monitor.check('upstream');
    expect(monitor.reports().upstream).toMatchObject({ status: 'failing', reason: 'timeout' });
  });
});
