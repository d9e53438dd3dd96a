/** Escapes a text for an HTML attribute or element. */
function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * The console's page, for a mount whose URL path is `base` (what the browser asked for, without query or trailing
 * slash, so an app's global prefix is included): markup only; the script and stylesheet come from `base/app.js`
 * and `base/app.css` (the Content-Security-Policy allows no inline script or style).
 */
export function renderConsolePage(base: string): string {
  const b = escapeHtml(base);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Outbox console</title>
<link rel="stylesheet" href="${b}/app.css">
</head>
<body data-base="${b}">
<header><h1>Outbox console<span id="outbox-name"></span></h1><span id="updated">loading…</span></header>
<main>
<nav id="outboxes" aria-label="Outboxes" hidden></nav>
<div id="error" role="alert" hidden></div>
<div class="cards">
  <div class="card"><div class="label">Pending</div><div class="value" id="pending">–</div></div>
  <div class="card"><div class="label">Due now</div><div class="value" id="due">–</div></div>
  <div class="card"><div class="label">In flight</div><div class="value" id="inFlight">–</div></div>
  <div class="card" id="dead-card"><div class="label">Dead</div><div class="value" id="dead">–</div></div>
  <div class="card"><div class="label">Lag (oldest pending)</div><div class="value" id="lag">–</div></div>
</div>
<p id="breakers" role="status" hidden></p>
<section>
  <h2>Throughput and lag</h2>
  <div class="legend">
    <span class="thr">■ published / s</span> (bars, left) · <span class="lag">— lag</span> (line, right)
  </div>
  <svg id="chart" viewBox="0 0 640 170" role="img" aria-label="Published messages per second and lag"></svg>
</section>
<section id="groups">
  <h2>Failure groups</h2>
  <p class="muted">Dead letters by cause: error class, message with numbers, ids and quoted values replaced, first application frame.</p>
  <p id="groups-notice" class="muted" hidden></p>
  <table>
    <thead><tr><th>Dead</th><th>Error</th><th>Message</th><th>Frame</th><th>Patterns</th><th>First seen</th><th>Last seen</th><th></th></tr></thead>
    <tbody id="group-rows"></tbody>
  </table>
  <p id="groups-empty" class="muted" hidden>No dead message.</p>
</section>
<section>
  <h2>Dead letters</h2>
  <form id="filters">
    <label>Pattern<input id="f-pattern" name="pattern" autocomplete="off"></label>
    <label>Key<input id="f-key" name="key" autocomplete="off"></label>
    <label>Destination<input id="f-destination" name="destination" autocomplete="off" placeholder="broker:… / handler:… / *"></label>
    <label>Error contains<input id="f-errorContains" name="errorContains" autocomplete="off"></label>
    <label>Dead since<input id="f-deadSince" name="deadSince" type="datetime-local"></label>
    <label>Dead before<input id="f-deadBefore" name="deadBefore" type="datetime-local"></label>
    <button type="submit" class="primary">Apply</button>
    <button type="reset">Clear</button>
  </form>
  <div class="actions">
    <button type="button" id="try-all">Try all matching</button>
    <button type="button" id="requeue-all">Requeue all matching…</button>
    <button type="button" id="purge-all" class="danger">Purge all matching…</button>
  </div>
  <p id="notice" role="status"></p>
  <table>
    <thead><tr><th>Dead since</th><th>Pattern</th><th>Key</th><th>Destination</th><th>Attempts</th><th>Last error</th></tr></thead>
    <tbody id="dead-rows"></tbody>
  </table>
  <p id="empty" class="muted" hidden>No dead message matches.</p>
  <button type="button" id="more" hidden>Load more</button>
</section>
<section id="pending-view">
  <h2>Not dead yet: pending and in flight</h2>
  <form id="pending-filters">
    <label>Pattern<input id="p-pattern" name="pattern" autocomplete="off"></label>
    <label>Key<input id="p-key" name="key" autocomplete="off"></label>
    <label>State<select id="p-state" name="state">
      <option value="">pending and in flight</option><option value="pending">pending</option><option value="in-flight">in flight</option>
    </select></label>
    <button type="submit" class="primary">Apply</button>
    <button type="reset">Clear</button>
  </form>
  <table>
    <thead><tr><th>Written</th><th>Pattern</th><th>Key</th><th>Destination</th><th>State</th><th>Attempts</th><th>Age</th><th>Lease owner</th><th>Last error</th></tr></thead>
    <tbody id="pending-rows"></tbody>
  </table>
  <p id="pending-empty" class="muted" hidden>Nothing pending.</p>
  <button type="button" id="pending-more" hidden>Load more</button>
</section>
<section id="keys-view">
  <h2>Idempotency key</h2>
  <form id="key-form">
    <label>Key<input id="k-key" name="key" autocomplete="off" required></label>
    <label>Scope<input id="k-scope" name="scope" autocomplete="off" placeholder="every scope"></label>
    <button type="submit" class="primary">Look up</button>
  </form>
  <table>
    <thead><tr><th>Scope</th><th>Key</th><th>State</th><th>Response status</th><th>Recorded</th><th>Expires</th></tr></thead>
    <tbody id="key-rows"></tbody>
  </table>
  <p id="key-empty" class="muted" hidden>No record of this key.</p>
</section>
<section id="trace-view">
  <h2>Trace</h2>
  <p class="muted">What a request or a message caused: its record, the messages it emitted, the consumers here that applied them, and what they emitted in turn.</p>
  <form id="trace-form">
    <label>Key or message id<input id="t-id" name="id" autocomplete="off" required></label>
    <label>Scope<input id="t-scope" name="scope" autocomplete="off" placeholder="none (keys without a principal)"></label>
    <label>Depth<input id="t-depth" name="depth" type="number" min="1" max="20" value="4"></label>
    <button type="submit" class="primary">Trace</button>
  </form>
  <p id="trace-notice" class="muted" hidden></p>
  <div id="trace-tree"></div>
</section>
<section id="trial" hidden>
  <h2>Dry run</h2>
  <p id="trial-summary" role="status"></p>
  <table>
    <thead><tr><th>Message</th><th>Pattern</th><th>Destination</th><th>Result</th><th>Detail</th></tr></thead>
    <tbody id="trial-rows"></tbody>
  </table>
  <div class="actions">
    <button type="button" id="trial-requeue" class="primary" hidden>Requeue…</button>
    <button type="button" id="trial-close">Close</button>
  </div>
</section>
<section id="detail" hidden>
  <h2 id="d-title"></h2>
  <dl id="d-facts"></dl>
  <div class="actions">
    <button type="button" id="d-try">Try</button>
    <button type="button" id="d-edit" hidden>Edit…</button>
    <button type="button" id="d-requeue" class="primary">Requeue…</button>
    <button type="button" id="d-purge" class="danger">Purge…</button>
    <button type="button" id="d-close">Close</button>
  </div>
  <form id="edit" hidden>
    <h2>Edit and requeue</h2>
    <p class="muted">A corrected copy with a new id replaces this dead letter in its key's order; the original is kept,
      marked replaced, and the edit is audited with your name. Values shown as *** keep their stored value.</p>
    <div class="split">
      <label>Payload (JSON)<textarea id="e-payload" rows="12" spellcheck="false"></textarea></label>
      <label>Headers (JSON object of strings)<textarea id="e-headers" rows="12" spellcheck="false"></textarea></label>
    </div>
    <label>Reason<input id="e-reason" maxlength="1000" autocomplete="off" placeholder="why it is changed (kept in the audit)"></label>
    <div class="actions">
      <button type="submit" id="e-submit" class="primary">Requeue the corrected copy…</button>
      <button type="button" id="e-cancel">Cancel</button>
    </div>
  </form>
  <div id="d-audit" hidden><h2>Edit audit</h2><pre id="d-audit-text"></pre></div>
  <div class="split">
    <div><h2>Payload</h2><pre id="d-payload"></pre></div>
    <div><h2>Headers</h2><pre id="d-headers"></pre></div>
  </div>
  <h2>Attempt history</h2>
  <table>
    <thead><tr><th>#</th><th>Failed at</th><th>Counted</th><th>Publisher</th><th>Error</th></tr></thead>
    <tbody id="d-history"></tbody>
  </table>
  <p id="d-nohistory" class="muted" hidden>No failed attempt recorded.</p>
</section>
</main>
<dialog id="confirm">
  <p id="confirm-text"></p>
  <div class="actions">
    <button type="button" id="confirm-ok" class="primary">Confirm</button>
    <button type="button" id="confirm-cancel">Cancel</button>
  </div>
</dialog>
<script src="${b}/app.js"></script>
</body>
</html>
`;
}
