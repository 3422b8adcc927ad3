import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { EnvSchema } from '../../../src/config/config.js';
import { renderConfigReference, undescribedSettings } from '../../../src/config/reference.js';

// The configuration reference is generated from EnvSchema; these tests keep the committed page current, every
// setting described, and show on a schema of their own that both checks would catch a lapse.

const committed = (): string =>
  readFileSync(new URL('../../../docs/reference/configuration.md', import.meta.url), 'utf8');

describe('configuration reference', () => {
  it('the committed docs/reference/configuration.md is current (npm run docs)', () => {
    expect(committed(), 'docs/reference/configuration.md is stale: run npm run docs').toBe(renderConfigReference());
  });

  it('every setting of EnvSchema has a description', () => {
    expect(undescribedSettings()).toEqual([]);
  });

  it('lists every setting of EnvSchema exactly once, with its description', () => {
    const page = renderConfigReference();
    for (const [name, setting] of Object.entries(EnvSchema.shape)) {
      const rows = page.split('\n').filter((line) => line.startsWith(`| \`${name}\` |`));
      expect(rows, name).toHaveLength(1);
      expect(rows[0]).toContain((setting as z.ZodType).description!.replaceAll('|', '\\|'));
    }
  });

  it('finds a setting without a description', () => {
    const schema = z.object({ A: z.string().describe('described'), B: z.string() });
    expect(undescribedSettings(schema)).toEqual(['B']);
  });

  it('renders defaults, required settings, allowed values and limits from the schema', () => {
    const schema = z.object({
      KAFKA_BROKERS: z.string().min(1).describe('Brokers'),
      KAFKA_ACKS: z.enum(['all', 'one']).default('all').describe('Acks'),
      POLL_INTERVAL_MS: z.coerce.number().int().min(100).max(3_600_000).default(1000).describe('How often | why'),
      LOG_LEVEL: z.string().optional().describe('Level'),
    });
    const page = renderConfigReference(schema);
    expect(page).toContain('## Kafka');
    expect(page).toContain('| `KAFKA_BROKERS` | required | string | Brokers |');
    expect(page).toContain('| `KAFKA_ACKS` | `all` | `all`, `one` | Acks |');
    expect(page).toMatch(/\| `POLL_INTERVAL_MS` \| `1000` \| [^|]*≥ 100[^|]*≤ 3600000[^|]* \| How often \\\| why \|/);
    expect(page).toContain('| `LOG_LEVEL` | unset |');
    expect(page.indexOf('## Kafka')).toBeLessThan(page.indexOf('## Passes'));
  });
});
