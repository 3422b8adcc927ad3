// Combining abort signals without AbortSignal.any(): on Node 20 every any() call stays registered on its source
// signals until they abort (nodejs/node#55351), and on Node 24 memory still grows with such calls, so combining the client's long-lived shutdown signal with one
// per request would leak a few hundred megabytes a day at 10 requests/s. Here the link is undone explicitly.

/** A signal that aborts when any source does, and `dispose()` to unhook it from the sources. */
export interface LinkedSignal {
  signal: AbortSignal;
  dispose(): void;
}

/** Links the given signals (undefined ones are skipped); always call dispose() when the operation ends. */
export function linkSignals(...sources: (AbortSignal | undefined)[]): LinkedSignal {
  const controller = new AbortController();
  const hooked: { source: AbortSignal; onAbort: () => void }[] = [];
  const dispose = (): void => {
    for (const { source, onAbort } of hooked.splice(0)) source.removeEventListener('abort', onAbort);
  };
  for (const source of sources) {
    if (!source) continue;
    if (source.aborted) {
      controller.abort(source.reason);
      dispose();
      break;
    }
    const onAbort = (): void => {
      controller.abort(source.reason);
      dispose();
    };
    source.addEventListener('abort', onAbort, { once: true });
    hooked.push({ source, onAbort });
  }
  return { signal: controller.signal, dispose };
}

/** A signal that aborts with a TimeoutError after `ms`, and `dispose()` to clear the timer early. */
export function deadlineSignal(ms: number): LinkedSignal {
  const controller = new AbortController();
  const timer = setTimeout(() => {
    controller.abort(new DOMException(`no answer within ${ms} ms`, 'TimeoutError'));
  }, ms);
  return { signal: controller.signal, dispose: () => clearTimeout(timer) };
}
