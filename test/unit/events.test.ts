import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { eventId } from '../../src/events.js';
import { renderSchemas } from '../../src/schemas.js';

describe('event ids', () => {
  it('are deterministic name-based UUIDs of source, review, sequence and state', () => {
    const id = eventId('urn:a', 1, 1, 'x');
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(eventId('urn:a', 1, 1, 'x')).toBe(id);
    expect(
      new Set([
        id,
        eventId('urn:b', 1, 1, 'x'),
        eventId('urn:a', 2, 1, 'x'),
        eventId('urn:a', 1, 2, 'x'),
        eventId('urn:a', 1, 1, 'y'),
      ]).size,
    ).toBe(5);
  });
});

describe('checked-in JSON Schemas', () => {
  it('are current with the zod definitions (run `npm run schemas` after changing them)', () => {
    const rendered = renderSchemas();
    expect([...rendered.keys()].sort()).toEqual([
      'review.created.v1.json',
      'review.status_changed.v1.json',
      'review.updated.v1.json',
    ]);
    for (const [name, text] of rendered) {
      expect(readFileSync(new URL(`../../schemas/${name}`, import.meta.url), 'utf8'), name).toBe(text);
    }
  });
});
