/**
 * True when `value` is a URI-reference (RFC 3986) as the CloudEvents `source` must be: a non-empty string without
 * whitespace or characters a URI never holds, and a scheme (when it has one) of letters, digits, `+`, `-`, `.`.
 */
export function isUriReference(value: unknown): value is string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 2048) return false;
  if (/[\s<>"{}|\\^`\u0000-\u001f\u007f]/.test(value)) return false;
  const colon = value.indexOf(':');
  const slash = value.search(/[/?#]/);
  if (colon > -1 && (slash === -1 || colon < slash)) return /^[A-Za-z][A-Za-z0-9+.-]*$/.test(value.slice(0, colon));
  return true;
}
