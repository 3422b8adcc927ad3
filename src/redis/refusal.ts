import { z } from 'zod';
import type { BridgeRedis } from './connection.js';

// A refused leadership (src/bridge/loop.ts) as `status` shows it: written by the replica refused, removed by the
// next leadership readied. It expires on its own (a replica that stopped refusing by stopping says nothing more).

/** A refusal as Redis keeps it. */
export const RefusalRecordSchema = z.object({
  setting: z.string().describe('the setting the refusal names'),
  reason: z.string().describe("the refusal's one line: what was found and what to change"),
  replica: z.string().describe('the replica refused'),
  since: z.number().int().describe('since when (ms)'),
});

/** A refusal as Redis keeps it. */
export type RefusalRecord = z.infer<typeof RefusalRecordSchema>;

/** How long a refusal stays without being said again (ms): a refused replica says it again at every check. */
const REFUSAL_TTL_MS = 10 * 60_000;

/** Records the refusal (or removes it: null). */
export async function recordRefusal(redis: BridgeRedis, key: string, refusal: RefusalRecord | null): Promise<void> {
  if (refusal === null) await redis.del(key);
  else await redis.set(key, JSON.stringify(refusal), 'PX', REFUSAL_TTL_MS);
}

/** The refusal recorded, or null (none, or unreadable). */
export async function readRefusal(redis: BridgeRedis, key: string): Promise<RefusalRecord | null> {
  const raw = await redis.get(key);
  if (raw === null) return null;
  try {
    const parsed = RefusalRecordSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}
