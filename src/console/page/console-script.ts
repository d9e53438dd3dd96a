import { CONSOLE_CHART_JS } from './console-script-chart';
import { CONSOLE_EDIT_JS } from './console-script-edit';
import { CONSOLE_LOOKUPS_JS } from './console-script-lookups';
import { CONSOLE_TRY_JS } from './console-script-try';
/**
 * The console page's script (vanilla JS, no build step), served as `<path>/app.js`: outboxes, summary, failure
 * groups, dead letters, one message; requeue and purge after a confirmation. Its other parts are inserted into the
 * same closure: the chart (console-script-chart.ts), pending rows and key lookup (console-script-lookups.ts), the dry
 * run (console-script-try.ts) and edit-and-requeue (console-script-edit.ts). Every text from the server is set with `textContent`, never as HTML.
 */
export const CONSOLE_APP_JS = String.raw`'use strict';
(function () {
  var base = document.body.getAttribute('data-base') || '';
  var api = base + '/api/';
  var state = { filter: {}, cursor: null, lastDead: null, selected: null, outbox: null, generation: 0 };
  state.outbox = new URLSearchParams(window.location.search).get('outbox') || null;

  function $(id) { return document.getElementById(id); }
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    (children || []).forEach(function (c) { node.append(c); });
    return node;
  }
  function text(tag, value, attrs) {
    var n = el(tag, attrs);
    n.textContent = value == null ? '' : String(value);
    return n;
  }
  function when(ms) { return ms ? new Date(ms).toLocaleString() : '—'; }
  function age(ms) {
    if (!ms) return '0 s';
    if (ms < 1000) return ms + ' ms';
    var s = Math.round(ms / 1000);
    if (s < 120) return s + ' s';
    var m = Math.round(s / 60);
    return m < 120 ? m + ' min' : Math.round(m / 60) + ' h';
  }
  function query(obj) {
    var parts = [];
    Object.keys(obj).forEach(function (k) {
      if (obj[k] === undefined || obj[k] === null || obj[k] === '') return;
      parts.push(encodeURIComponent(k) + '=' + encodeURIComponent(obj[k]));
    });
    return parts.length ? '?' + parts.join('&') : '';
  }
  function problemText(body, res) {
    return (body && (body.detail || body.title)) || ('HTTP ' + res.status);
  }
  function call(method, path, body) {
    var init = { method: method, headers: { Accept: 'application/json' }, credentials: 'same-origin' };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.headers['X-Outbox-Console'] = '1';
      init.body = JSON.stringify(body);
    }
    var url = api + path;
    if (state.outbox) url += (path.indexOf('?') < 0 ? '?' : '&') + 'outbox=' + encodeURIComponent(state.outbox);
    var generation = state.generation;
    return fetch(url, init).then(function (res) {
      // An answer about the outbox shown before the operator picked another one is dropped.
      if (generation !== state.generation) throw STALE;
      return res.text().then(function (raw) {
        var data = null;
        try { data = raw ? JSON.parse(raw) : null; } catch (e) { data = null; }
        if (!res.ok) throw new Error(problemText(data, res));
        return data;
      });
    });
  }
  var STALE = new Error('an answer about the outbox shown before');
  function showError(error) {
    if (error === STALE) return;
    var box = $('error');
    box.textContent = error ? String(error.message || error) : '';
    box.hidden = !error;
  }

  // ── the app's outboxes ─────────────────────────────────────────────────────────────────────────────────────
  function refreshOutboxes() {
    return call('GET', 'outboxes').then(function (list) {
      var nav = $('outboxes');
      var outboxes = list.outboxes;
      var current = state.outbox;
      if (!current) outboxes.forEach(function (o) { if (o.default) current = o.name; });
      outboxes.forEach(function (o) { if (o.name === current) state.allowEdit = o.allowEdit === true; });
      nav.hidden = outboxes.length < 2;
      $('outbox-name').textContent = outboxes.length < 2 ? '' : ' · ' + current;
      while (nav.firstChild) nav.removeChild(nav.firstChild);
      outboxes.forEach(function (o) {
        var facts = o.stats
          ? o.stats.pending + ' pending · ' + o.stats.dead + ' dead · lag ' + age(o.stats.oldestPendingAgeMs)
          : 'stats unavailable';
        var button = el('button', {
          type: 'button', class: 'outbox', 'data-outbox': o.name, 'aria-pressed': String(o.name === current),
        }, [text('span', o.name, { class: 'name' }), text('span', facts, { class: 'facts' })]);
        button.classList.toggle('alert', !o.stats || o.stats.dead > 0);
        button.addEventListener('click', function () { selectOutbox(o.name); });
        nav.append(button);
      });
    });
  }
  function selectOutbox(name) {
    if (name === state.outbox) return;
    state.outbox = name;
    state.generation++;
    window.history.replaceState(null, '', window.location.pathname + '?outbox=' + encodeURIComponent(name));
    state.filter = {};
    state.cursor = null;
    state.lastDead = null;
    state.selected = null;
    $('filters').reset();
    $('detail').hidden = true;
    $('notice').textContent = '';
    // Resetting the forms reloads the dead letters and the pending rows (their 'reset' listeners).
    $('pending-filters').reset();
    $('key-rows').textContent = '';
    return Promise.all([loadGroups(), refreshOutboxes(), refreshSummary(), refreshChart()]).catch(showError);
  }

  // ── summary and chart ──────────────────────────────────────────────────────────────────────────────────────
  function refreshSummary() {
    return call('GET', 'summary').then(function (s) {
      $('pending').textContent = s.pending;
      $('due').textContent = s.due;
      $('inFlight').textContent = s.inFlight;
      $('dead').textContent = s.dead;
      $('lag').textContent = age(s.oldestPendingAgeMs);
      $('dead-card').classList.toggle('alert', s.dead > 0);
      showBreakers(s.circuits || []);
      $('updated').textContent = 'updated ' + new Date(s.at).toLocaleTimeString();
      if (state.lastDead !== null && state.lastDead !== s.dead) { loadDead(true); loadGroups(); loadPending(true); }
      state.lastDead = s.dead;
      showError(null);
    });
  }

  // One line of the brokers whose circuit breaker is not closed (this process's relay); hidden when all are.
  function showBreakers(circuits) {
    var line = circuits.filter(function (c) { return c.state !== 'closed'; }).map(function (c) {
      return 'broker ' + c.broker + ': ' + (c.state === 'open' ? 'paused (breaker open)' : 'probing (half-open)') +
        ' after ' + c.failures + ' failed publishes';
    }).join(' · ');
    $('breakers').textContent = line ? 'Circuit breaker — ' + line : '';
    $('breakers').hidden = !line;
  }

  // ── dead letters ───────────────────────────────────────────────────────────────────────────────────────────
  function readFilter() {
    var f = {};
    ['pattern', 'key', 'destination', 'errorContains'].forEach(function (name) {
      var v = $('f-' + name).value.trim();
      if (v) f[name] = v;
    });
    ['deadSince', 'deadBefore'].forEach(function (name) {
      var v = $('f-' + name).value;
      if (v) f[name] = new Date(v).toISOString();
    });
    return f;
  }
  function loadDead(reset) {
    var params = Object.assign({}, state.filter, { limit: 50 });
    if (!reset && state.cursor) params.cursor = state.cursor;
    return call('GET', 'dead-letters' + query(params)).then(function (page) {
      var body = $('dead-rows');
      if (reset) while (body.firstChild) body.removeChild(body.firstChild);
      page.items.forEach(function (m) {
        var row = el('tr', { 'data-id': m.messageId, tabindex: '0' }, [
          text('td', when(m.deadAt)), text('td', m.pattern), text('td', m.key == null ? '—' : m.key),
          text('td', destinationLabel(m.destination)),
          text('td', m.attempts, { class: 'num' }), text('td', m.lastError, { class: 'err' }),
        ]);
        row.addEventListener('click', function () { openMessage(m.messageId, m.destination); });
        row.addEventListener('keydown', function (e) { if (e.key === 'Enter') openMessage(m.messageId, m.destination); });
        body.append(row);
      });
      state.cursor = page.nextCursor;
      $('more').hidden = !page.nextCursor;
      $('empty').hidden = body.children.length > 0;
    }).catch(showError);
  }

  // ── failure groups ─────────────────────────────────────────────────────────────────────────────────────────
  function groupLabel(g) { return (g.errorClass ? g.errorClass + ': ' : '') + g.message; }
  function loadGroups() {
    return call('GET', 'dead-letters/groups?limit=50').then(function (result) {
      var body = $('group-rows');
      while (body.firstChild) body.removeChild(body.firstChild);
      result.groups.forEach(function (g) {
        var show = text('button', 'Show', { type: 'button', class: 'show' });
        var requeue = text('button', 'Requeue…', { type: 'button', class: 'requeue' });
        var purge = text('button', 'Purge…', { type: 'button', class: 'danger purge' });
        show.addEventListener('click', function () { showGroup(g); });
        requeue.addEventListener('click', function () { actOnGroup('requeue', g); });
        purge.addEventListener('click', function () { actOnGroup('purge', g); });
        body.append(el('tr', { 'data-group': g.group }, [
          text('td', g.count, { class: 'num' }), text('td', g.errorClass || '—'), text('td', g.message, { class: 'err' }),
          text('td', g.frame || '—', { class: 'err' }), text('td', g.patterns.join(', ')),
          text('td', when(g.firstSeen)), text('td', when(g.lastSeen)),
          el('td', { class: 'row-actions' }, [show, tryButton(g), requeue, purge]),
        ]));
      });
      $('groups-empty').hidden = result.groups.length > 0;
      var notice = $('groups-notice');
      notice.hidden = result.complete;
      notice.textContent = result.complete ? '' : 'Grouped over the newest ' + result.scanned + ' dead messages only.';
    }).catch(showError);
  }
  function showGroup(g) {
    // The filter fields are cleared by hand: resetting the form would load the unfiltered list as well.
    Array.prototype.forEach.call($('filters').querySelectorAll('input'), function (input) { input.value = ''; });
    state.filter = { group: g.group };
    $('notice').textContent = 'Showing the failure group ' + groupLabel(g) + '.';
    loadDead(true);
  }
  function actOnGroup(action, g) {
    var filter = seenOf(g); // only the group's messages dead when it was listed, not those dying since
    return call('GET', 'dead-letters/count' + query(filter)).then(function (r) {
      if (r.count === 0) { $('notice').textContent = 'No dead message is left in this group.'; return; }
      return act(action, { filter: filter },
        (action === 'requeue' ? 'Requeue ' : 'Purge ') + r.count + ' dead message(s) of the failure group "' +
        groupLabel(g) + '"?' + (action === 'purge' ? ' They are deleted for good.' : ''));
    }).catch(showError);
  }

  // ── one message ────────────────────────────────────────────────────────────────────────────────────────────
  function destinationLabel(d) { return d ? d : 'all (decided when published)'; }
  function openMessage(id, destination) {
    var at = destination == null ? '' : query({ destination: destination });
    return call('GET', 'messages/' + encodeURIComponent(id) + at).then(function (m) {
      state.selected = m;
      var panel = $('detail');
      panel.hidden = false;
      $('d-title').textContent = m.pattern + ' · ' + m.messageId;
      var facts = $('d-facts');
      while (facts.firstChild) facts.removeChild(facts.firstChild);
      [['Status', m.status], ['Key', m.key == null ? '—' : m.key],
        ['Destination', destinationLabel(m.destination)],
        ['All destinations', m.destinations.map(function (d) {
          return destinationLabel(d.destination) + ': ' + d.status;
        }).join(' · ')], ['Attempts', m.attempts],
        ['Written', when(m.createdAt)], ['Dead since', when(m.deadAt)], ['Last error', m.lastError || '—']]
        .concat(m.replacedBy ? [['Replaced by', m.replacedBy]] : [], m.replaces ? [['Replaces', m.replaces]] : [])
        .forEach(function (pair) { facts.append(text('dt', pair[0]), text('dd', pair[1])); });
      var payload = m.payload;
      try { payload = JSON.stringify(JSON.parse(m.payload), null, 2); } catch (e) { /* keep the text */ }
      $('d-payload').textContent = payload;
      $('d-headers').textContent = m.headers ? JSON.stringify(m.headers, null, 2) : '(none)';
      var rows = $('d-history');
      while (rows.firstChild) rows.removeChild(rows.firstChild);
      m.history.forEach(function (a) {
        rows.append(el('tr', {}, [text('td', a.attempt, { class: 'num' }), text('td', when(a.failedAt)),
          text('td', a.counted ? 'yes' : 'no (broker unreachable)'), text('td', a.publisher),
          text('td', a.error, { class: 'err' })]));
      });
      $('d-nohistory').hidden = m.history.length > 0;
      var isDead = m.status === 'dead';
      $('d-requeue').disabled = !isDead;
      $('d-purge').disabled = !isDead;
      showEditFor(m);
      panel.scrollIntoView({ block: 'nearest' });
    }).catch(showError);
  }

  // ── confirmation and actions ───────────────────────────────────────────────────────────────────────────────
  function confirmAction(message) {
    return new Promise(function (resolve) {
      var dialog = $('confirm');
      $('confirm-text').textContent = message;
      function done(answer) {
        $('confirm-ok').removeEventListener('click', ok);
        $('confirm-cancel').removeEventListener('click', cancel);
        dialog.removeEventListener('cancel', cancel);
        dialog.close();
        resolve(answer);
      }
      function ok() { done(true); }
      function cancel(e) { if (e) e.preventDefault(); done(false); }
      $('confirm-ok').addEventListener('click', ok);
      $('confirm-cancel').addEventListener('click', cancel);
      dialog.addEventListener('cancel', cancel);
      dialog.showModal();
    });
  }
  function act(action, selection, message) {
    return confirmAction(message).then(function (yes) {
      if (!yes) return;
      return call('POST', action, selection).then(function (result) {
        $('notice').textContent = (action === 'requeue' ? 'Requeued ' : 'Purged ') + result.count + ' message(s).';
        $('detail').hidden = true;
        state.selected = null;
        return Promise.all([loadDead(true), loadGroups(), loadPending(true), refreshSummary()]);
      });
    }).catch(showError);
  }
  function actOnFilter(action) {
    var filter = Object.assign({}, state.filter);
    return call('GET', 'dead-letters/count' + query(filter)).then(function (r) {
      if (r.count === 0) { $('notice').textContent = 'No dead message matches the filter.'; return; }
      var what = Object.keys(filter).length ? 'matching the filter' : '(no filter: every dead message)';
      return act(action, { filter: filter },
        (action === 'requeue' ? 'Requeue ' : 'Purge ') + r.count + ' dead message(s) ' + what + '?' +
        (action === 'purge' ? ' They are deleted for good.' : ''));
    }).catch(showError);
  }

  $('filters').addEventListener('submit', function (e) {
    e.preventDefault();
    try { state.filter = readFilter(); } catch (err) { showError(err); return; }
    loadDead(true);
  });
  $('filters').addEventListener('reset', function () {
    state.filter = {};
    setTimeout(function () { loadDead(true); });
  });
  $('more').addEventListener('click', function () { loadDead(false); });
  $('requeue-all').addEventListener('click', function () { actOnFilter('requeue'); });
  $('purge-all').addEventListener('click', function () { actOnFilter('purge'); });
  $('d-requeue').addEventListener('click', function () {
    var m = state.selected;
    if (m) act('requeue', { ids: [m.messageId] }, 'Requeue message ' + m.messageId + ' (' + m.pattern + ')?');
  });
  $('d-purge').addEventListener('click', function () {
    var m = state.selected;
    if (!m) return;
    var what = 'Purge message ' + m.messageId + ' (' + m.pattern + ')?';
    act('purge', { ids: [m.messageId] }, what + ' It is deleted for good.');
  });
  $('d-close').addEventListener('click', function () { $('detail').hidden = true; state.selected = null; });
${CONSOLE_CHART_JS}
${CONSOLE_LOOKUPS_JS}
${CONSOLE_TRY_JS}
${CONSOLE_EDIT_JS}
  function tick() {
    Promise.all([refreshOutboxes(), refreshSummary(), refreshChart()]).catch(showError).then(function () { setTimeout(tick, 2000); });
  }
  loadDead(true);
  loadGroups();
  loadPending(true);
  tick();
  window.outboxConsole = { call: call, el: el, text: text, query: query, showError: showError, openMessage: openMessage };
})();
`;
