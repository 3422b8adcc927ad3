import { describe, expect, it } from 'vitest';
import { list, sim, token, type Envelope } from './helpers.js';

// Field notes: responses may come compressed (gzip, deflate, br), above 10 MB even when the client did not ask.
// Spec, Limits: payload size 10 MB maximum. The simulator compresses an oversized page regardless, and answers 400
// (JSON, asking for a smaller limit) when it is still over the limit on the wire.

describe('compression and payload size', () => {
  it('sends plain JSON when the client does not ask for compression', async () => {
    const { url } = await sim();
    const answer = await list(url, await token(url));
    expect(answer.headers['content-encoding']).toBeUndefined();
    expect(Number(answer.headers['content-length'])).toBe(answer.raw.length);
    expect((answer.json() as Envelope).count).toBe(100);
  });

  it.each([
    ['gzip', 'gzip'],
    ['deflate', 'deflate'],
    ['br', 'br'],
    ['gzip;q=0.5, br', 'br'],
    ['deflate, gzip', 'gzip'],
    ['*', 'gzip'],
    ['*, gzip;q=0', 'br'],
    ['identity', undefined],
  ])('honours Accept-Encoding: %s', async (acceptEncoding, expected) => {
    const { url } = await sim();
    const accessToken = await token(url);
    const plain = (await list(url, accessToken)).text;
    const answer = await list(url, accessToken, {}, { 'accept-encoding': acceptEncoding });
    expect(answer.headers['content-encoding']).toBe(expected);
    expect(answer.headers.vary).toBe('Accept-Encoding');
    expect(answer.text).toBe(plain);
    if (expected !== undefined) expect(answer.raw.length).toBeLessThan(plain.length / 3);
  });

  it("with compression 'always' gzips although the client did not ask", async () => {
    const { url } = await sim({ compression: 'always' });
    const answer = await list(url, await token(url));
    expect(answer.headers['content-encoding']).toBe('gzip');
    expect((answer.json() as Envelope).count).toBe(100);
  });

  it("with compression 'never' ignores Accept-Encoding", async () => {
    const { url } = await sim({ compression: 'never' });
    const answer = await list(url, await token(url), {}, { 'accept-encoding': 'gzip' });
    expect(answer.headers['content-encoding']).toBeUndefined();
  });

  it('gzips a page above the payload limit although the client did not ask', async () => {
    const { url } = await sim({ payloadLimitBytes: 20_000 });
    const answer = await list(url, await token(url));
    expect(answer.status).toBe(200);
    expect(answer.headers['content-encoding']).toBe('gzip');
    expect(answer.raw.length).toBeLessThanOrEqual(20_000);
    expect(answer.text.length).toBeGreaterThan(20_000);
  });

  it('answers 400 asking for a smaller limit when the page is over the limit even compressed', async () => {
    const { url } = await sim({ payloadLimitBytes: 1_000 });
    const accessToken = await token(url);
    const answer = await list(url, accessToken);
    expect(answer.status).toBe(400);
    expect(answer.json()).toEqual({ error: expect.stringContaining('smaller limit') });
    expect((await list(url, accessToken, { limit: 1 })).status).toBe(200);
  });

  it("answers 400 for an oversized page when compression is 'never'", async () => {
    const { url } = await sim({ payloadLimitBytes: 20_000, compression: 'never' });
    expect((await list(url, await token(url))).status).toBe(400);
  });
});
