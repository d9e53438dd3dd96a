/**
 * The console script's edit-and-requeue ("Edit…", `POST <path>/api/edit`): shown on a dead message only when its
 * outbox allows edits (`allowEdit` of `api/outboxes`); a form with the payload and headers as JSON text (as shown,
 * redacted: values left as `***` keep their stored value) and a reason, sent after a confirmation. Also shows a
 * message's edit audit. Inserted into the script's closure by `console-script.ts` (it uses its `call`,
 * `confirmAction`, `state`, `$`, `when`, `showError`, `openMessage` and the loaders). Every text goes through
 * `textContent` or a textarea's `value`, never HTML.
 */
export const CONSOLE_EDIT_JS = String.raw`
  // ── edit and requeue ───────────────────────────────────────────────────────────────────────────────────────
  function showEditFor(m) {
    $('edit').hidden = true;
    $('d-edit').hidden = !(state.allowEdit && m.status === 'dead');
    var audit = m.edit;
    $('d-audit').hidden = !audit;
    if (!audit) return;
    var lines = [
      (m.replacedBy ? 'Replaced by ' + m.replacedBy : 'Corrected copy of ' + audit.replaces) +
        ' · edited ' + when(audit.editedAt) + ' by ' + (audit.actor || 'unknown'),
      'Reason: ' + (audit.reason || '—'),
    ];
    audit.changes.forEach(function (c) {
      lines.push(c.field + (c.path || ' (whole)') + ': ' + (c.before == null ? '(absent)' : c.before) + ' → ' +
        (c.after == null ? '(absent)' : c.after));
    });
    if (audit.truncated) lines.push('… more changes not listed');
    $('d-audit-text').textContent = lines.join('\n');
  }
  $('d-edit').addEventListener('click', function () {
    var m = state.selected;
    if (!m || m.status !== 'dead') return;
    var payload = m.payload;
    try { payload = JSON.stringify(JSON.parse(m.payload), null, 2); } catch (e) { /* keep the text */ }
    var headers = Object.assign({}, m.headers || {});
    ['x-outbox-replaces', 'x-outbox-inbox-scope', 'x-outbox-inbox-fingerprint'].forEach(function (name) {
      delete headers[name]; // written by the library, kept on the copy
    });
    $('e-payload').value = payload;
    $('e-headers').value = JSON.stringify(headers, null, 2);
    $('e-reason').value = '';
    $('edit').hidden = false;
    $('e-payload').focus();
  });
  $('e-cancel').addEventListener('click', function () { $('edit').hidden = true; });
  $('edit').addEventListener('submit', function (e) {
    e.preventDefault();
    var m = state.selected;
    if (!m) return;
    var body = { id: m.messageId, destination: m.destination, payload: $('e-payload').value,
      headers: $('e-headers').value, reason: $('e-reason').value };
    confirmAction('Replace dead message ' + m.messageId + ' (' + m.pattern + ') by a corrected copy and requeue ' +
      'it? The original is kept, marked replaced; the edit is audited.').then(function (yes) {
      if (!yes) return;
      return call('POST', 'edit', body).then(function (result) {
        $('notice').textContent = 'Replaced message ' + m.messageId + ' by ' + result.messageId +
          ' (requeued; ' + result.audit.changes.length + ' change(s) audited).';
        $('edit').hidden = true;
        return Promise.all([openMessage(result.messageId), loadDead(true), loadGroups(), loadPending(true),
          refreshSummary()]);
      });
    }).catch(showError);
  });
`;
