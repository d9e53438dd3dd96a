/**
 * The trace view's script, served after the page's own script in `<path>/app.js` (it uses the helpers that script
 * leaves on `window.outboxConsole`): a key (with its scope) or a message id is traced through `api/trace` and shown
 * as a tree — the request, the messages it emitted with their rows, failed attempts and consumers, and what those
 * emitted. Read-only. Every text from the server is set with `textContent`, never as HTML.
 */
export const CONSOLE_TRACE_JS = String.raw`
(function () {
  var c = window.outboxConsole;
  if (!c) return;
  var form = document.getElementById('trace-form');
  if (!form) return;

  function at(iso) { return iso ? new Date(iso).toLocaleString() : '—'; }
  function line(kind, state, parts) {
    var head = c.el('div', { class: 'trace-line' });
    head.append(c.text('span', kind, { class: 'trace-kind' }));
    if (state) head.append(c.text('span', state, { class: 'trace-state state-' + state }));
    parts.forEach(function (p) { head.append(c.text('span', p)); });
    return head;
  }
  function record(r) {
    var label = r.kind === 'request' ? 'request' : r.kind === 'handler' ? 'in-process handler' : 'consumer';
    var item = c.el('li', { 'data-trace': 'record', 'data-scope': r.scope, 'data-state': r.state });
    var parts = ['scope ' + JSON.stringify(r.scope), 'key ' + r.key];
    if (r.responseStatus != null) parts.push('HTTP ' + r.responseStatus);
    parts.push('recorded ' + at(r.createdAt), 'expires ' + at(r.expiresAt));
    item.append(line(label, r.state, parts));
    if (r.steps.length) {
      item.append(c.text('div', 'steps: ' + r.steps.map(function (s) { return s.name + ' (' + at(s.createdAt) + ')'; }).join(', '), { class: 'muted' }));
    }
    if (r.response) item.append(c.text('pre', 'response: ' + (r.response.body == null ? '—' : r.response.body)));
    if (r.emitted.length) item.append(c.el('ul', {}, r.emitted.map(message)));
    return item;
  }
  function message(m) {
    var item = c.el('li', { 'data-trace': 'message', 'data-message-id': m.messageId, 'data-state': m.state || 'consumed' });
    var parts = [m.pattern == null ? '(not in this outbox)' : m.pattern, m.messageId];
    if (m.key != null) parts.push('key ' + m.key);
    if (m.createdAt) parts.push('written ' + at(m.createdAt));
    var head = line('message', m.state, parts);
    if (m.pattern != null) {
      var open = c.text('button', 'Open', { type: 'button' });
      open.addEventListener('click', function () { c.openMessage(m.messageId, null).catch(c.showError); });
      head.append(open);
    }
    item.append(head);
    var rows = m.destinations.map(function (d) {
      var li = c.el('li', { 'data-trace': 'destination', 'data-state': d.state });
      var facts = [d.destination ? d.destination : 'all destinations', 'attempts ' + d.attempts];
      if (d.sentAt) facts.push('sent ' + at(d.sentAt));
      if (d.deadAt) facts.push('dead ' + at(d.deadAt));
      li.append(line('row', d.state, facts));
      if (d.lastError) li.append(c.text('pre', d.lastError, { class: 'trace-error' }));
      d.failures.forEach(function (f) {
        li.append(c.text('div', '#' + f.attempt + ' ' + at(f.at) + (f.counted ? '' : ' (not counted)') + ': ' + f.error, { class: 'trace-failure' }));
      });
      return li;
    });
    if (rows.length) item.append(c.el('ul', { class: 'trace-rows' }, rows));
    if (m.consumers.length) item.append(c.el('ul', {}, m.consumers.map(record)));
    else if (m.pattern != null) item.append(c.text('div', 'No consumer in this database has applied it.', { class: 'muted' }));
    return item;
  }

  form.addEventListener('submit', function (e) {
    e.preventDefault();
    var params = { id: document.getElementById('t-id').value, scope: document.getElementById('t-scope').value, depth: document.getElementById('t-depth').value };
    c.call('GET', 'trace' + c.query(params)).then(function (t) {
      var tree = document.getElementById('trace-tree');
      while (tree.firstChild) tree.removeChild(tree.firstChild);
      var top = [];
      if (t.request) top.push(record(t.request));
      if (t.message) top.push(message(t.message));
      if (top.length) tree.append(c.el('ul', { class: 'trace' }, top));
      var notice = document.getElementById('trace-notice');
      notice.textContent = !top.length
        ? 'Nothing found: no key ' + JSON.stringify(t.id) + ' in scope ' + JSON.stringify(t.scope) + ', and no message with this id.'
        : t.truncated ? 'Deeper levels or more messages were left out (depth ' + t.depth + ').' : '';
      notice.hidden = notice.textContent === '';
      c.showError(null);
    }).catch(c.showError);
  });
})();
`;
