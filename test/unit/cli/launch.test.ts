import { describe, expect, it } from 'vitest';
import { chooseEntry, nodeRefusal } from '../../../bin/launch.js';

// The decisions of bin/reviews-bridge.js: which Node it refuses, and whether it runs dist/ or the sources. The
// command itself is spawned in test/e2e/first-day.test.ts (a clone without a build, a Node too old).

describe('nodeRefusal', () => {
  it('refuses a Node older than engines in one line naming both versions and how to get Node 24', () => {
    const line = nodeRefusal('20.20.2', '>=22.19.0');
    expect(line).toBe(
      'reviews-bridge: Node 22.19.0 or newer is needed (this is Node 20.20.2): in a clone, ' +
        '`source scripts/node.sh && use_node24` puts Node 24 first on PATH; otherwise install Node 24 LTS ' +
        '(https://nodejs.org/) or run the container image',
    );
    expect(line).not.toContain('\n');
    expect(nodeRefusal('22.18.9', '>=22.19.0')).not.toBeNull();
    expect(nodeRefusal('22.19.0', '>=22.19.0')).toBeNull();
    expect(nodeRefusal('22.20.0', '>=22.19.0')).toBeNull();
    expect(nodeRefusal('24.21.0', '>=22.19.0')).toBeNull();
    expect(nodeRefusal('100.0.0', '>= 22')).toBeNull();
    expect(nodeRefusal('21.9.9', '>= 22')).toContain('Node 22.0.0 or newer');
  });

  it('leaves ranges it does not read, and a missing one, unchecked', () => {
    expect(nodeRefusal('12.0.0', '^22 || ^24')).toBeNull();
    expect(nodeRefusal('12.0.0', undefined)).toBeNull();
  });
});

describe('chooseEntry', () => {
  it('runs dist/ when it is built and no source is newer', () => {
    expect(chooseEntry({ distBuiltAt: 2_000, newestSourceAt: 1_000, tsx: true })).toBe('dist');
    expect(chooseEntry({ distBuiltAt: 2_000, newestSourceAt: 2_000, tsx: true })).toBe('dist');
  });

  it('runs the sources through tsx without a build, or with sources edited since it', () => {
    expect(chooseEntry({ distBuiltAt: null, newestSourceAt: 1_000, tsx: true })).toBe('sources');
    expect(chooseEntry({ distBuiltAt: 1_000, newestSourceAt: 2_000, tsx: true })).toBe('sources');
  });

  it('runs dist/ where the sources or tsx are missing (a production image), and nothing without either', () => {
    expect(chooseEntry({ distBuiltAt: 1_000, newestSourceAt: null, tsx: false })).toBe('dist');
    expect(chooseEntry({ distBuiltAt: 1_000, newestSourceAt: 2_000, tsx: false })).toBe('dist');
    expect(chooseEntry({ distBuiltAt: null, newestSourceAt: 2_000, tsx: false })).toBe('none');
    expect(chooseEntry({ distBuiltAt: null, newestSourceAt: null, tsx: true })).toBe('none');
  });
});
