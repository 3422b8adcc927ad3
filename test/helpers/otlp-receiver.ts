import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

// An in-process OTLP/HTTP trace receiver: what a collector's otlp receiver does for POST /v1/traces with the JSON
// encoding (the one @opentelemetry/exporter-trace-otlp-http sends), decoded into flat spans a test can query.

/** One received span, attributes flattened to plain values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  attributes: Record<string, string | number | boolean>;
  links: { traceId: string; spanId: string }[];
  /** `service.name` of the resource that sent it. */
  service: string;
  startMs: number;
  endMs: number;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  status: number;
}

/** A running receiver. */
export interface OtlpReceiver {
  /** Base URL (OTEL_EXPORTER_OTLP_ENDPOINT). */
  url: string;
  spans: ReceivedSpan[];
  /** Every request body as received (decoded): what a test searches for data that must not be there. */
  bodies: string[];
  /** Requests that were not a POST of JSON to /v1/traces. */
  refused: string[];
  close(): Promise<void>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes?: OtlpAttribute[];
  links?: { traceId: string; spanId: string }[];
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
  status?: { code?: number };
}
interface OtlpExport {
  resourceSpans?: {
    resource?: { attributes?: OtlpAttribute[] };
    scopeSpans?: { spans?: OtlpSpan[] }[];
  }[];
}

function plain(value: OtlpValue): string | number | boolean {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.doubleValue !== undefined) return value.doubleValue;
  return JSON.stringify(value);
}

function attributes(list: OtlpAttribute[] = []): Record<string, string | number | boolean> {
  return Object.fromEntries(list.map((a) => [a.key, plain(a.value)]));
}

// OTLP/JSON writes ids as hex; a base64 one (protobuf-style JSON) is converted so tests compare hex everywhere.
function hex(id: string | undefined): string {
  if (!id) return '';
  return /^[0-9a-f]+$/.test(id) ? id : Buffer.from(id, 'base64').toString('hex');
}

async function body(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  return (req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw).toString('utf8');
}

/** Starts a receiver on a free loopback port. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  const refused: string[] = [];
  const server = createServer((req, res) => {
    void (async () => {
      const text = await body(req);
      const json = String(req.headers['content-type'] ?? '').startsWith('application/json');
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !json) {
        refused.push(`${req.method} ${req.url} ${req.headers['content-type']}`);
        res.writeHead(415).end();
        return;
      }
      bodies.push(text);
      const data = JSON.parse(text) as OtlpExport;
      for (const rs of data.resourceSpans ?? []) {
        const service = String(attributes(rs.resource?.attributes)['service.name'] ?? '');
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            spans.push({
              traceId: hex(s.traceId),
              spanId: hex(s.spanId),
              parentSpanId: hex(s.parentSpanId),
              name: s.name,
              attributes: attributes(s.attributes),
              links: (s.links ?? []).map((l) => ({ traceId: hex(l.traceId), spanId: hex(l.spanId) })),
              service,
              startMs: Number(BigInt(s.startTimeUnixNano) / 1_000_000n),
              endMs: Number(BigInt(s.endTimeUnixNano) / 1_000_000n),
              status: s.status?.code ?? 0,
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    })().catch(() => res.writeHead(400).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    bodies,
    refused,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
