import { describe, expect, it } from 'vitest';
import { durabilityProblem } from '../../../src/redis/durability.js';

// The start-up verdict on REDIS_WAIT_REPLICAS: a replica that is away is waited for, a primary without the replicas
// asked for stops start-up with the setting named (unless the operator chose to wait).

describe('durabilityProblem', () => {
  const report = (connected: number, known: number) => ({ primary: '10.0.0.5:6379', connected, known });

  it('has nothing to say when no wait is asked for or the replicas exist (connected or away)', () => {
    expect(durabilityProblem(report(0, 0), 0, false)).toBeNull();
    expect(durabilityProblem(report(1, 1), 1, false)).toBeNull();
    expect(durabilityProblem(report(0, 1), 1, false)).toBeNull();
  });

  it('names the setting, the primary and the choices when the topology has too few replicas', () => {
    const line = durabilityProblem(report(0, 0), 1, false);
    expect(line).toContain('REDIS_WAIT_REPLICAS=1 cannot be met: the primary 10.0.0.5:6379 has 0 replica(s)');
    expect(line).toContain('REDIS_WAIT_FOR_REPLICAS=true');
    expect(durabilityProblem(report(1, 1), 2, false)).toContain('has 1 replica(s)');
  });

  it('lets the operator choose to wait', () => {
    expect(durabilityProblem(report(0, 0), 1, true)).toBeNull();
  });
});
