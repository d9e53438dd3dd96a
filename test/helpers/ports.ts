import { createServer } from 'node:net';

/** A TCP port that was free a moment ago on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * Polls `check` until it returns true or `timeoutMs` passes (then throws with `what`, and with what `explain`
 * reports of the state at that moment, so an intermittent timeout says where it was stuck).
 */
export async function waitFor(
  check: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 20_000,
  explain?: () => Promise<string>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  const state = explain ? await explain().catch((error) => `(could not explain: ${String(error)})`) : undefined;
  throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}${state ? `; state: ${state}` : ''}`);
}
