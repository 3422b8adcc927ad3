import { promisify } from 'node:util';
import { brotliCompress, constants, deflate, gzip } from 'node:zlib';

// Response compression. The field notes say the real service compresses large responses even when the client did
// not ask, so besides ordinary negotiation there is a forced mode: a client must decode whatever arrives.

/** A content coding the simulator can produce. */
export type Encoding = 'gzip' | 'deflate' | 'br';

const PREFERENCE: readonly Encoding[] = ['gzip', 'br', 'deflate'];

const gzipAsync = promisify(gzip);
const deflateAsync = promisify(deflate);
const brotliAsync = promisify(brotliCompress);

/** The coding to answer with: the client's best supported choice, else gzip when forced, else none. */
export function chooseEncoding(acceptEncoding: string | undefined, forced: boolean): Encoding | null {
  const weights = new Map<string, number>();
  for (const part of (acceptEncoding ?? '').split(',')) {
    const [name = '', ...params] = part.trim().toLowerCase().split(';');
    let q = 1;
    for (const param of params) {
      const [key, value] = param.trim().split('=');
      if (key === 'q') q = Number(value);
    }
    if (name !== '') weights.set(name, Number.isFinite(q) ? q : 0);
  }
  let best: Encoding | null = null;
  let bestQ = 0;
  // PREFERENCE order breaks ties; an explicit q=0 excludes a coding even when * allows everything.
  for (const encoding of PREFERENCE) {
    const q = weights.get(encoding) ?? weights.get('*') ?? 0;
    if (q > bestQ) {
      best = encoding;
      bestQ = q;
    }
  }
  return best ?? (forced ? 'gzip' : null);
}

/** The body in the given coding; brotli at a moderate quality so a benchmark measures the client, not zlib. */
export function compress(body: Buffer, encoding: Encoding): Promise<Buffer> {
  switch (encoding) {
    case 'gzip':
      return gzipAsync(body);
    case 'deflate':
      return deflateAsync(body);
    case 'br':
      return brotliAsync(body, { params: { [constants.BROTLI_PARAM_QUALITY]: 4 } });
  }
}
