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
<section>
  <h2>Throughput and lag</h2>
  <div class="legend">
    <span class="thr">■ published / s</span> (bars, left) · <span class="lag">— lag</span> (line, right)
  </div>
  <svg id="chart" viewBox="0 0 640 170" role="img" aria-label="Published messages per second and lag"></svg>
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
<section id="detail" hidden>
  <h2 id="d-title"></h2>
  <dl id="d-facts"></dl>
  <div class="actions">
    <button type="button" id="d-requeue" class="primary">Requeue…</button>
    <button type="button" id="d-purge" class="danger">Purge…</button>
    <button type="button" id="d-close">Close</button>
  </div>
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
