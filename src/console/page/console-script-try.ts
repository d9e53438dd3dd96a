/**
 * The console script's dry run ("Try", `POST <path>/api/dry-run`): a "Try" button on each failure group, on the
 * dead-letter filter and on one message, and the panel listing each tried message's result, with a requeue of the
 * messages that passed. Inserted into the script's closure by `console-script.ts` (it uses its `call`, `act`,
 * `state`, `$`, `el`, `text`, `destinationLabel` and `groupLabel`). Every server text goes through `textContent`.
 */
export const CONSOLE_TRY_JS = String.raw`
  // ── dry run ("Try") ────────────────────────────────────────────────────────────────────────────────────────
  var trial = { passing: [] };
  // A group's messages as listed: dead at or before its last death then (one that dies later is not acted on).
  function seenOf(g) { return g.lastSeen ? { group: g.group, deadBefore: g.lastSeen + 1 } : { group: g.group }; }
  function tryButton(g) {
    var button = text('button', 'Try', { type: 'button', class: 'try' });
    button.addEventListener('click', function () {
      trySelection({ filter: seenOf(g) }, 'the failure group "' + groupLabel(g) + '"');
    });
    return button;
  }
  function trySelection(selection, what) {
    $('trial').hidden = false;
    $('trial-requeue').hidden = true;
    $('trial-rows').textContent = '';
    $('trial-summary').textContent = 'Trying ' + what + '…';
    return call('POST', 'dry-run', selection).then(function (result) {
      showTrial(result, what);
      $('trial').scrollIntoView({ block: 'nearest' });
    }).catch(showError);
  }
  function targetText(t) {
    if (!t.ok) return t.destination + ': ' + t.error.errorClass + ': ' + t.error.message;
    if (t.packet) {
      return t.destination + ': would send ' + t.packet.pattern + ' over ' + t.packet.transport + ' (' +
        t.packet.bytes + ' bytes; headers ' + t.packet.headers.join(', ') + ')' +
        (t.packet.connected === false ? ' — the client is disconnected now' : '');
    }
    return t.destination + ': ' + (t.outcome === 'skipped' ? 'already applied, skipped' : 'ran, rolled back');
  }
  function showTrial(result, what) {
    var body = $('trial-rows');
    var failed = {};
    result.results.forEach(function (m) {
      if (!m.ok) failed[m.messageId] = true;
      var details = m.error ? [m.error.errorClass + ': ' + m.error.message] : m.targets.map(targetText);
      body.append(el('tr', { 'data-id': m.messageId, 'data-ok': String(m.ok) }, [
        text('td', m.messageId), text('td', m.pattern), text('td', destinationLabel(m.destination)),
        text('td', m.ok ? 'would succeed' : 'fails again', { class: m.ok ? 'ok' : 'err' }),
        text('td', details.join('\n'), { class: 'detail' }),
      ]));
    });
    trial.passing = [];
    result.results.forEach(function (m) {
      if (m.ok && !failed[m.messageId] && trial.passing.indexOf(m.messageId) < 0) trial.passing.push(m.messageId);
    });
    $('trial-summary').textContent = 'Dry run of ' + what + ': tried ' + result.tried + ' dead message(s), ' +
      result.ok + ' would succeed, ' + result.failed + ' would fail again.' +
      (result.complete ? '' : ' Only the newest ' + result.tried + ' were tried.') + ' Nothing was committed or sent.';
    var requeue = $('trial-requeue');
    requeue.textContent = 'Requeue the ' + trial.passing.length + ' that passed…';
    requeue.hidden = trial.passing.length === 0;
  }
  $('trial-requeue').addEventListener('click', function () {
    var ids = trial.passing.slice();
    if (ids.length) act('requeue', { ids: ids }, 'Requeue the ' + ids.length + ' message(s) that passed the dry run?');
  });
  $('trial-close').addEventListener('click', function () { $('trial').hidden = true; });
  $('try-all').addEventListener('click', function () {
    var filter = Object.assign({}, state.filter);
    trySelection({ filter: filter }, Object.keys(filter).length ? 'the filter' : 'all dead messages');
  });
  $('d-try').addEventListener('click', function () {
    var m = state.selected;
    if (m && m.status === 'dead') trySelection({ ids: [m.messageId] }, 'message ' + m.messageId);
  });
`;
