import { checkpointView, type CheckpointView } from '../core/checkpoint-change.js';
import { accountKeys, type BridgeRedis } from './connection.js';
import { ControlFlags } from './control-flags.js';

// Reads an account's checkpoint as an operator sees it (GET /v1/accounts/{account}/checkpoint and
// `reviews-bridge checkpoint get`): one implementation for both; the shape is src/core/checkpoint-change.ts.

/** An account's checkpoint, pause and pending change as Redis records them now. */
export async function readCheckpointView(
  redis: BridgeRedis,
  ref: { account: string; keyPrefix: string },
): Promise<CheckpointView> {
  const keys = accountKeys(ref.keyPrefix, ref.account);
  const flags = new ControlFlags(redis, keys);
  const [hash, pausedSince, pending] = await Promise.all([
    redis.hgetall(keys.checkpoint),
    flags.pausedSince(),
    flags.pendingCheckpointChange(),
  ]);
  return checkpointView({ account: ref.account, hash, pausedSince, pending });
}
