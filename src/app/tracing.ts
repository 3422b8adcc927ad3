import { DiagLogLevel, diag, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import type { Logger } from 'pino';
import type { BridgeConfig } from '../config/config.js';

// The OpenTelemetry SDK of a bridge process, on only when the OTEL_* settings ask for it (BridgeConfig.tracing):
// spans are batched and sent as OTLP over HTTP (JSON) to the configured endpoint. The exporter reads the rest of
// the standard OTLP variables itself (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _CERTIFICATE...). Off, the bridge
// keeps the API's no-op tracer and this module loads nothing but the imports.

/** The process's tracing: the tracer the passes use and the flush at shutdown. */
export interface Tracing {
  /** The SDK's tracer when tracing is on, the API's no-op tracer otherwise. */
  tracer: Tracer | null;
  /** Sends the spans still batched and stops the exporter; bounded by `timeoutMs`. */
  shutdown(timeoutMs?: number): Promise<void>;
}

const TRACER_NAME = 'reviews-bridge';

// The SDK's own diagnostics (an unreachable collector, a refused export) go to the bridge's log as warnings,
// never to stderr: set once per process (diag is global).
let diagnosticsSet = false;

/** Starts the SDK when tracing is on; without it, a tracing that records nothing. */
export function startTracing(settings: BridgeConfig['tracing'], logger: Logger): Tracing {
  if (!settings.enabled) return { tracer: null, shutdown: async () => undefined };
  if (!diagnosticsSet) {
    diagnosticsSet = true;
    const log = logger.child({ component: 'opentelemetry' });
    const write = (level: 'warn' | 'error') => (message: string) => log[level](message);
    diag.setLogger(
      {
        error: write('error'),
        warn: write('warn'),
        info: () => undefined,
        debug: () => undefined,
        verbose: () => undefined,
      },
      { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
    );
  }
  const exporter = new OTLPTraceExporter(settings.endpoint ? { url: settings.endpoint } : {});
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': settings.serviceName }),
    spanProcessors: [
      new BatchSpanProcessor({ exporter, scheduledDelayMillis: settings.scheduleDelayMs, exportTimeoutMillis: 10_000 }),
    ],
  });
  // The origin only: an endpoint's path or query could carry a credential.
  const origin = settings.endpoint ? new URL(settings.endpoint).origin : '(exporter default)';
  // serviceName, not service: the log lines' own `service` (the process) is bound already.
  logger.info({ endpoint: origin, serviceName: settings.serviceName }, 'tracing on');
  return {
    tracer: provider.getTracer(TRACER_NAME),
    shutdown: async (timeoutMs = 10_000) => {
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
        timer.unref();
      });
      await Promise.race([provider.shutdown().catch(() => undefined), bound]);
      clearTimeout(timer);
    },
  };
}
