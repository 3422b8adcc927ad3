import { describe, expect, it } from 'vitest';
import { Readable } from 'node:stream';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { UpstreamError, excerpt, isUpstreamError, redact } from '../../../src/upstream/errors.js';
import { decodersFor, readBody } from '../../../src/upstream/http.js';

describe('redact', () => {
  it('removes e-mail addresses, bearer/basic credentials and given secrets', () => {
    const text =
      'user jane.doe+x@example.co.uk sent Authorization: Bearer abc.def-123 with s3cr3t-value and Basic ZGVtbzpzZWNyZXQ=';
    const out = redact(text, ['s3cr3t-value']);
    expect(out).not.toContain('jane.doe');
    expect(out).not.toContain('abc.def-123');
    expect(out).not.toContain('s3cr3t-value');
    expect(out).not.toContain('ZGVtbzpzZWNyZXQ=');
    expect(out).toContain('[email]');
  });

  it('excerpt is one redacted line of bounded length', () => {
    const out = excerpt(`{"error":\n"bad"}\n${'x'.repeat(500)}`, [], 50);
    expect(out.startsWith('{"error": "bad"}')).toBe(true);
    expect(out.length).toBeLessThanOrEqual(51);
  });
});

describe('UpstreamError', () => {
  it('is retryable for throttled/server/network/body only, and never once final', () => {
    const kinds = [
      'throttled',
      'server',
      'network',
      'body',
      'auth',
      'scope',
      'client',
      'cursor_loop',
      'too_large',
    ] as const;
    expect(kinds.filter((k) => new UpstreamError(k, 'x').retryable)).toEqual([
      'throttled',
      'server',
      'network',
      'body',
    ]);
    expect(new UpstreamError('server', 'x', { final: true }).retryable).toBe(false);
    expect(isUpstreamError(new UpstreamError('scope', 'x'), 'scope')).toBe(true);
    expect(isUpstreamError(new Error('x'))).toBe(false);
  });
});

describe('readBody', () => {
  const json = Buffer.from(JSON.stringify({ reviews: Array.from({ length: 50 }, (_, i) => ({ id: i })) }));
  const stream = (buf: Buffer) => Readable.from([buf.subarray(0, 10), buf.subarray(10)]);

  it.each([
    ['gzip', gzipSync(json)],
    ['x-gzip', gzipSync(json)],
    ['deflate', deflateSync(json)],
    ['br', brotliCompressSync(json)],
    ['identity', json],
    ['gzip, br', brotliCompressSync(gzipSync(json))],
  ])('decodes Content-Encoding %s', async (encoding, wire) => {
    const body = await readBody(stream(wire), { 'content-encoding': encoding }, 1 << 20, 'reviews');
    expect(body.equals(json)).toBe(true);
  });

  it('refuses a body whose decoded size exceeds the cap, even if it is small on the wire', async () => {
    const bomb = gzipSync(Buffer.alloc(5 * 1024 * 1024, 'x'));
    expect(bomb.length).toBeLessThan(64 * 1024);
    const err = await readBody(stream(bomb), { 'content-encoding': 'gzip' }, 1024 * 1024, 'reviews').catch(
      (e: unknown) => e,
    );
    expect(isUpstreamError(err, 'too_large')).toBe(true);
    expect((err as Error).message).toMatch(/exceeds the 1048576-byte cap/);
  });

  it('refuses early on a declared Content-Length above the cap', async () => {
    const err = await readBody(stream(json), { 'content-length': '999999999' }, 1024, 'reviews').catch(
      (e: unknown) => e,
    );
    expect(isUpstreamError(err, 'too_large')).toBe(true);
  });

  it('cuts an error body short instead of failing', async () => {
    const body = await readBody(stream(Buffer.alloc(5000, 'e')), {}, 100, 'reviews', false);
    expect(body.length).toBe(100);
  });

  it('fails on a truncated gzip stream', async () => {
    const wire = gzipSync(json);
    await expect(
      readBody(stream(wire.subarray(0, wire.length >> 1)), { 'content-encoding': 'gzip' }, 1 << 20, 'reviews'),
    ).rejects.toThrow();
  });

  it('treats an unknown encoding as a body error', () => {
    expect(() => decodersFor('compress', 'reviews')).toThrow(/unsupported Content-Encoding 'compress'/);
  });
});
