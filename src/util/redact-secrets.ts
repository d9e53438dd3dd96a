/**
 * Removes credentials from a text before it is logged, stored (`last_error`), put in an event or a response.
 *
 * - The user-info of every URL: `amqp://user:secret@host:5672` → `amqp://***@host:5672` (scheme, host and port
 *   stay, so an operator still sees where the client tried to go); a scheme-less `user:secret@host` likewise.
 * - The value of the usual secret fields, in `key=value`, `key: value`, `"key": "value"` and `key='value'` forms:
 *   password, passwd, pass, pwd, token (access/refresh/…), secret (client secret, …), authorization, auth,
 *   apiKey / api_key / x-api-key, credentials, private key — also as the end of a longer name (`dbPassword`,
 *   `session_token`). An `Authorization: Bearer …` value loses its credential, keeps its scheme.
 *
 * The result never contains the removed values; applying it twice changes nothing more.
 */
export const REDACTED = '***';

/** `scheme://userinfo@` — userinfo up to the last `@` before the host, never across whitespace, quotes or brackets. */
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#"'`<>\\{}[\]]+@/gi;

/** `user:pass@host` without a scheme (NATS `servers`, connection strings), at the start of a token. */
const BARE_USERINFO = /(^|[\s"'`(=,[{])[^\s:/@"'`<>\\{}[\]]+:[^\s/@"'`<>\\{}[\]]+@(?=[\w[])/g;

const SECRET_NAME =
  '[\\w.-]*?(?:passw(?:or)?d|pass|pwd|token|secret|authorization|auth|api[_-]?key|apikey|credentials?|private[_-]?key)';

/**
 * A secret field and its value. Groups: 1 = name with its quotes and separator, 2 = quoted value (with quotes),
 * 3 = auth scheme of a bare value, 4 = bare value.
 */
const SECRET_FIELD = new RegExp(
  `(["']?\\b${SECRET_NAME}["']?\\s*[:=]\\s*)` +
    `(?:("(?:[^"\\\\]|\\\\.)*"|'(?:[^'\\\\]|\\\\.)*')` +
    `|((?:Bearer|Basic|Digest|Token|Bot)\\s+)?([^\\s,;&"'}\\])]+))`,
  'gi',
);

/** The text with every URL user-info and every secret field's value replaced by `***`. */
export function redactSecrets(text: string): string {
  if (typeof text !== 'string' || text.length === 0) return text;
  return text
    .replace(URL_USERINFO, `$1${REDACTED}@`)
    .replace(BARE_USERINFO, `$1${REDACTED}@`)
    .replace(SECRET_FIELD, (_match, name: string, quoted?: string, scheme?: string) => {
      if (quoted !== undefined) return `${name}${quoted[0]}${REDACTED}${quoted[0]}`;
      return `${name}${scheme ?? ''}${REDACTED}`;
    });
}

const SECRET_FIELD_NAME = new RegExp(`^${SECRET_NAME}$`, 'i');

/** True for a field name whose value `redactSecrets()` hides (`password`, `apiKey`, `x-db-password`, …). */
export function isSecretFieldName(name: string): boolean {
  return SECRET_FIELD_NAME.test(name);
}
