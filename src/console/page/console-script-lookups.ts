/**
 * The console script's read-only lookups: the pending and in-flight rows (`GET <path>/api/pending`, paged, with
 * filters) and the idempotency key lookup (`GET <path>/api/keys`). Inserted into the script's closure by
 * `console-script.ts` (it uses its `call`, `query`, `$`, `el`, `text`, `when`, `age`, `showError`, `openMessage` and
 * `destinationLabel`). Every server text goes through `textContent`.
 */
export const CONSOLE_LOOKUPS_JS = String.raw`
  // ── not dead yet ───────────────────────────────────────────────────────────────────────────────────────────
  var pending = { filter: {}, cursor: null };
  function loadPending(reset) {
    var params = Object.assign({}, pending.filter, { limit: 50 });
    if (!reset && pending.cursor) params.cursor = pending.cursor;
    return call('GET', 'pending' + query(params)).then(function (page) {
      var body = $('pending-rows');
      if (reset) while (body.firstChild) body.removeChild(body.firstChild);
      page.items.forEach(function (m) {
        var row = el('tr', { 'data-id': m.messageId, 'data-state': m.state, tabindex: '0' }, [
          text('td', when(m.createdAt)), text('td', m.pattern), text('td', m.key == null ? '—' : m.key),
          text('td', destinationLabel(m.destination)), text('td', m.state === 'in-flight' ? 'in flight' : 'pending'),
          text('td', m.attempts, { class: 'num' }), text('td', age(m.ageMs)), text('td', m.leaseOwner || '—'),
          text('td', m.lastError || '—', { class: 'err' }),
        ]);
        row.addEventListener('click', function () { openMessage(m.messageId, m.destination); });
        row.addEventListener('keydown', function (e) { if (e.key === 'Enter') openMessage(m.messageId, m.destination); });
        body.append(row);
      });
      pending.cursor = page.nextCursor;
      $('pending-more').hidden = !page.nextCursor;
      $('pending-empty').hidden = body.children.length > 0;
    }).catch(showError);
  }
  $('pending-filters').addEventListener('submit', function (e) {
    e.preventDefault();
    pending.filter = {};
    ['pattern', 'key', 'state'].forEach(function (name) {
      var v = $('p-' + name).value.trim();
      if (v) pending.filter[name] = v;
    });
    loadPending(true);
  });
  $('pending-filters').addEventListener('reset', function () {
    pending.filter = {};
    setTimeout(function () { loadPending(true); });
  });
  $('pending-more').addEventListener('click', function () { loadPending(false); });

  // ── idempotency key lookup ─────────────────────────────────────────────────────────────────────────────────
  $('key-form').addEventListener('submit', function (e) {
    e.preventDefault();
    var params = { key: $('k-key').value, scope: $('k-scope').value.trim() };
    call('GET', 'keys' + query(params)).then(function (result) {
      var body = $('key-rows');
      while (body.firstChild) body.removeChild(body.firstChild);
      result.records.forEach(function (r) {
        body.append(el('tr', { 'data-scope': r.scope }, [
          text('td', r.scope), text('td', r.key), text('td', r.state),
          text('td', r.responseStatus == null ? '—' : r.responseStatus, { class: 'num' }),
          text('td', when(r.createdAt)), text('td', when(r.expiresAt)),
        ]));
      });
      $('key-empty').hidden = result.records.length > 0;
      showError(null);
    }).catch(showError);
  });
`;
