import { describe, expect, it } from 'vitest';
import { gate, loggedPassesOnFakes } from '../../helpers/fakes.js';

// An operator's checkpoint change (recorded while paused) is applied by the leader through one commit. Taken from
// Redis before that commit, a change whose commit failed (a slow or restarting Kafka) was gone: the leader never
// applied it, and the operator's GET showed no pending change and the old watermark for ever.

const signal = new AbortController().signal;
const REWIND = Date.UTC(2026, 0, 1);

const setup = loggedPassesOnFakes;

describe('applying a checkpoint change', () => {
  it('a change whose commit fails stays pending and is applied on the next turn', async () => {
    const { passes, snapshot } = setup();
    await passes.prepare(1, signal);
    const change = { watermark: REWIND, requestedAt: REWIND + 1, by: 'carol' };
    snapshot.checkpointRequest = JSON.stringify(change);
    const refused = gate();
    snapshot.commitGate = refused;
    refused.fail(new Error('the transaction timed out'));
    await expect(passes.applyCheckpointChange(1)).rejects.toThrow('timed out');
    expect(snapshot.checkpointRequest).toBe(JSON.stringify(change));
    expect(snapshot.ckpt.watermark).not.toBe(REWIND);

    await expect(passes.applyCheckpointChange(1)).resolves.toEqual(change);
    expect(snapshot.ckpt.watermark).toBe(REWIND);
    expect(snapshot.checkpointRequest).toBeNull();
    await expect(passes.applyCheckpointChange(1)).resolves.toBeNull();
  });

  it('a change recorded while another is being committed is kept for the next turn', async () => {
    const { passes, snapshot } = setup();
    await passes.prepare(1, signal);
    const first = { watermark: REWIND, requestedAt: REWIND + 1, by: 'carol' };
    const second = { watermark: REWIND + 60_000, requestedAt: REWIND + 2, by: 'dave' };
    snapshot.checkpointRequest = JSON.stringify(first);
    const held = gate();
    snapshot.commitGate = held;
    const applying = passes.applyCheckpointChange(1);
    await new Promise((resolve) => setImmediate(resolve));
    snapshot.checkpointRequest = JSON.stringify(second);
    held.open();
    await expect(applying).resolves.toEqual(first);
    expect(snapshot.checkpointRequest).toBe(JSON.stringify(second));
    await expect(passes.applyCheckpointChange(1)).resolves.toEqual(second);
    expect(snapshot.ckpt.watermark).toBe(REWIND + 60_000);
  });
});
