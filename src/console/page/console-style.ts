/** The console page's stylesheet, served as `<path>/app.css`. */
export const CONSOLE_CSS = String.raw`
:root { --fg: #1d2330; --muted: #5d6677; --line: #dde2ea; --bg: #f5f7fa; --card: #fff; --accent: #2f6fdb;
  --lag: #d9822b; --bad: #c9302c; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); font-size: 14px; }
header { display: flex; align-items: baseline; gap: 12px; padding: 14px 24px; background: #1d2330; color: #fff; }
header h1 { margin: 0; font-size: 18px; font-weight: 600; }
header span { color: #aab3c2; font-size: 12px; }
main { padding: 18px 24px; max-width: 1200px; }
#outboxes { display: flex; flex-wrap: wrap; gap: 8px; margin-bottom: 16px; }
#outboxes button.outbox { display: flex; flex-direction: column; align-items: flex-start; gap: 2px; min-width: 150px;
  background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 8px 12px; text-align: left; }
#outboxes button.outbox .name { font-weight: 600; font-size: 14px; }
#outboxes button.outbox .facts { color: var(--muted); font-size: 12px; font-variant-numeric: tabular-nums; }
#outboxes button.outbox[aria-pressed="true"] { border-color: var(--accent); box-shadow: inset 0 0 0 1px var(--accent); }
#outboxes button.outbox.alert .facts { color: var(--bad); }
section {
  background: var(--card);
  border: 1px solid var(--line);
  border-radius: 8px;
  padding: 14px 16px;
  margin-bottom: 16px;
}
h2 { margin: 0 0 10px; font-size: 15px; }
.cards { display: grid; grid-template-columns: repeat(5, 1fr); gap: 12px; margin-bottom: 16px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; }
.card .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .value { font-size: 26px; font-weight: 600; margin-top: 2px; font-variant-numeric: tabular-nums; }
.card.alert { border-color: var(--bad); }
.card.alert .value { color: var(--bad); }
#chart { width: 100%; height: auto; max-height: 220px; }
#chart .plot { fill: #fafbfc; stroke: var(--line); }
#chart .grid { stroke: var(--line); stroke-dasharray: 3 3; }
#chart .bar { fill: var(--accent); opacity: .75; }
#chart .lagline { fill: none; stroke: var(--lag); stroke-width: 2; }
#chart .axis { font-size: 10px; fill: var(--muted); }
#chart .axis.thr { fill: var(--accent); }
#chart .axis.lag { fill: var(--lag); }
.legend { font-size: 12px; color: var(--muted); }
.legend .thr { color: var(--accent); font-weight: 600; }
.legend .lag { color: var(--lag); font-weight: 600; }
form { display: flex; flex-wrap: wrap; gap: 8px; align-items: end; margin-bottom: 10px; }
label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); gap: 2px; }
input { padding: 5px 7px; border: 1px solid var(--line); border-radius: 5px; font: inherit; min-width: 130px; }
button {
  padding: 6px 12px;
  border-radius: 5px;
  border: 1px solid var(--line);
  background: #fff;
  font: inherit;
  cursor: pointer;
}
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
button.danger { color: var(--bad); border-color: var(--bad); }
button:disabled { opacity: .4; cursor: default; }
.actions { display: flex; gap: 8px; margin: 8px 0; }
table { width: 100%; border-collapse: collapse; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; color: var(--muted); font-weight: 600; }
tbody tr[data-id] { cursor: pointer; }
tbody tr[data-id]:hover, tbody tr[data-id]:focus { background: #eef3fc; outline: none; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
#trial td.ok { color: var(--ok, #1a7f37); }
#trial td.detail { white-space: pre-wrap; word-break: break-word; font-family: ui-monospace, Menlo, monospace; font-size: 12px; }
td.err { color: var(--bad); font-family: ui-monospace, Menlo, monospace; font-size: 12px; word-break: break-word; }
pre {
  background: #f3f5f8;
  border: 1px solid var(--line);
  border-radius: 5px;
  padding: 8px;
  overflow: auto;
  max-height: 240px;
  font-size: 12px;
}
dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 14px; margin: 0 0 10px; }
dt { color: var(--muted); }
dd { margin: 0; word-break: break-word; }
.split { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
.muted { color: var(--muted); }
#breakers { color: var(--bad); margin: 0 0 12px; }
#error {
  background: #fdecea;
  color: var(--bad);
  border: 1px solid var(--bad);
  border-radius: 6px;
  padding: 8px 12px;
  margin-bottom: 12px;
}
#notice { color: var(--muted); min-height: 1.2em; }
#edit { display: block; border: 1px solid var(--line); border-radius: 8px; padding: 12px; margin: 12px 0; }
#edit label { display: block; margin: 6px 0; }
#edit textarea, #edit input { display: block; width: 100%; box-sizing: border-box; font-family: ui-monospace, Menlo, monospace; font-size: 12px; }
#d-audit-text { white-space: pre-wrap; word-break: break-word; }
dialog { border: 1px solid var(--line); border-radius: 8px; padding: 18px; max-width: 460px; }
dialog::backdrop { background: rgba(20, 25, 35, .35); }
td.row-actions { white-space: nowrap; }
td.row-actions button { margin-right: 4px; padding: 3px 8px; }
select { font: inherit; padding: 5px 6px; border: 1px solid var(--line); border-radius: 6px; background: #fff; }
ul.trace, ul.trace ul { list-style: none; margin: 4px 0 4px 0; padding-left: 18px; border-left: 2px solid var(--line); }
ul.trace li { margin: 6px 0; overflow-wrap: anywhere; }
.trace-line { display: flex; flex-wrap: wrap; gap: 4px 10px; align-items: baseline; }
.trace-kind { font-weight: 600; }
.trace-state { border-radius: 4px; padding: 0 6px; background: #eef1f5; }
.trace-state.state-dead { background: #fdecea; color: var(--bad); }
.trace-state.state-sent, .trace-state.state-completed { background: #e8f5ec; }
.trace-failure { font-size: 12px; color: var(--muted); white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.trace-line button { padding: 1px 8px; }
[hidden] { display: none !important; }
`;
