/** Injection token of the console's resolved options (`ResolvedOutboxConsoleOptions`). */
export const OUTBOX_CONSOLE_OPTIONS = Symbol('OUTBOX_CONSOLE_OPTIONS');

/** The header a state-changing console call must carry (`X-Outbox-Console: 1`); a cross-site form cannot send it. */
export const CONSOLE_CSRF_HEADER = 'x-outbox-console';
