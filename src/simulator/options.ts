import { z } from 'zod';
import type { Faults, RateLimitOptions, SimulatorOptions } from './types.js';

// Validation and defaults of the simulator's settings. A bad setting fails start-up (or the control call) with one
// message naming it, rather than a simulator that silently behaves unlike the spec.

const rate = z.number().min(0).max(1);

/** The poison kinds, in the order addPoisonReviews creates them. */
export const POISON_KINDS = ['huge-text', 'far-future-updated', 'far-created', 'deep-nesting', 'proto-keys'] as const;
const PoisonKindSchema = z.enum(POISON_KINDS);
const nonNegativeInt = z.number().int().nonnegative();

const FaultsSchema = z.strictObject({
  errorRate: rate,
  errorStatuses: z.array(z.number().int().min(400).max(599)),
  latencyMs: nonNegativeInt,
  truncateRate: rate,
  malformedRate: rate,
  padBytes: nonNegativeInt,
  statusFault: z
    .strictObject({
      status: z.number().int().min(200).max(599),
      cursorOnly: z.boolean().optional(),
      times: z.number().int().positive().optional(),
      retryAfterSeconds: nonNegativeInt.optional(),
    })
    .nullable(),
  poison: z.array(z.strictObject({ id: z.number().int().positive(), kind: PoisonKindSchema })),
  dropRate: rate,
  idless: z.array(z.number().int().positive()).max(100_000),
});

const RateLimitSchema = z
  .strictObject({
    rps: z.number().positive(),
    burst: z.number().min(1).optional(),
    status: z.union([z.literal(503), z.literal(429)]).optional(),
    retryAfterSeconds: nonNegativeInt.nullable().optional(),
  })
  .nullable();

/** Cursor paths are dotted property names; an empty or odd segment would make an unreadable envelope. */
const CursorPathSchema = z
  .string()
  .regex(/^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$/, 'must be a dotted path like paging.next_page');

const OptionsSchema = z.strictObject({
  host: z.string().min(1),
  port: z.number().int().min(0).max(65535),
  seed: z.number().int(),
  reviewCount: z.number().int().min(0).max(100_000_000),
  clientId: z.string().min(1),
  clientSecret: z.string().min(1),
  scopelessClientId: z.string().min(1),
  scopelessClientSecret: z.string().min(1),
  tokenTtlSeconds: z.number().int().positive(),
  rateLimit: RateLimitSchema,
  payloadLimitBytes: z.number().int().positive(),
  cursorPath: CursorPathSchema,
  lastPageCursor: z.enum(['absent', 'null']),
  listingOrder: z.enum(['ascending', 'descending']),
  updatedDateUnit: z.enum(['ms', 's']),
  updatedDateComparison: z.enum(['gte', 'gt']),
  compression: z.enum(['when-asked', 'always', 'never']),
  clockSkewMs: z.number().int().min(-86_400_000).max(86_400_000),
  dataClockOffsetMs: z.number().int().min(-86_400_000).max(86_400_000),
  faults: FaultsSchema.partial(),
});

/** Settings with every default filled in. */
export type ResolvedOptions = Required<Omit<SimulatorOptions, 'rateLimit' | 'faults'>> & {
  rateLimit: RateLimitOptions | null;
  faults: Partial<Faults>;
};

/** Defaults: a spec-faithful upstream (10 rps, 503, 1 h tokens, 10 MiB payloads). */
export const DEFAULT_OPTIONS: ResolvedOptions = {
  host: '127.0.0.1',
  port: 0,
  seed: 1,
  reviewCount: 1000,
  clientId: 'demo-client',
  clientSecret: 'demo-secret',
  scopelessClientId: 'scopeless-client',
  scopelessClientSecret: 'scopeless-secret',
  tokenTtlSeconds: 3600,
  rateLimit: { rps: 10, status: 503 },
  payloadLimitBytes: 10 * 1024 * 1024,
  cursorPath: 'next_page',
  lastPageCursor: 'absent',
  listingOrder: 'ascending',
  updatedDateUnit: 'ms',
  updatedDateComparison: 'gte',
  compression: 'when-asked',
  clockSkewMs: 0,
  dataClockOffsetMs: 0,
  faults: {},
};

/** Thrown for an invalid setting; the message names the setting. */
export class SimulatorConfigError extends Error {
  override name = 'SimulatorConfigError';
}

function parse<T>(schema: z.ZodType<T>, value: unknown, prefix: string): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const path = [prefix, ...(issue?.path ?? []).map(String)].filter((p) => p.length > 0).join('.');
  throw new SimulatorConfigError(`invalid simulator setting ${path || '(options)'}: ${issue?.message ?? 'invalid'}`);
}

/** Options merged over the defaults and validated. */
export function resolveOptions(options: SimulatorOptions = {}): ResolvedOptions {
  const defined = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
  const merged = { ...DEFAULT_OPTIONS, ...defined };
  if (merged.scopelessClientId === merged.clientId) {
    throw new SimulatorConfigError('invalid simulator setting scopelessClientId: must differ from clientId');
  }
  return parse(OptionsSchema, merged, '') as ResolvedOptions;
}

/** A complete, validated fault setting. */
export function parseFaults(value: unknown): Faults {
  return parse(FaultsSchema, value, 'faults');
}

/** A validated throttle setting (null = off). */
export function parseRateLimit(value: unknown): RateLimitOptions | null {
  return parse(RateLimitSchema, value, 'rateLimit');
}
