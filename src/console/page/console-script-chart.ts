/**
 * The console script's throughput and lag chart (`GET <path>/api/series`), drawn as SVG. Inserted into the script's
 * closure by `console-script.ts` (it uses its `call`, `$` and `age`). Texts are set with `textContent`.
 */
export const CONSOLE_CHART_JS = String.raw`
  // ── chart ──────────────────────────────────────────────────────────────────────────────────────────────────
  var SVG = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    return node;
  }
  function refreshChart() {
    return call('GET', 'series').then(function (series) {
      var chart = $('chart');
      while (chart.firstChild) chart.removeChild(chart.firstChild);
      var W = 640, H = 170, L = 44, R = 52, T = 10, B = 22;
      var samples = series.samples;
      var step = series.sampleInterval;
      var end = samples.length ? samples[samples.length - 1].at : Date.now();
      // Zoom in on the samples there are (a process that just started), up to the whole window.
      var start = Math.max(end - series.minutes * 60000, (samples.length ? samples[0].at : end) - step);
      var span = Math.max(end - start, 20 * step);
      start = end - span;
      var maxT = 1, maxLag = 1000;
      samples.forEach(function (s) { maxT = Math.max(maxT, s.throughput); maxLag = Math.max(maxLag, s.lagMs); });
      function x(at) { return L + ((at - start) / span) * (W - L - R); }
      function yT(v) { return T + (1 - v / maxT) * (H - T - B); }
      function yL(v) { return T + (1 - v / maxLag) * (H - T - B); }
      chart.append(svg('rect', { x: L, y: T, width: W - L - R, height: H - T - B, class: 'plot' }));
      [0, 0.5, 1].forEach(function (f) {
        var y = T + (1 - f) * (H - T - B);
        chart.append(svg('line', { x1: L, x2: W - R, y1: y, y2: y, class: 'grid' }));
        var left = svg('text', { x: L - 6, y: y + 4, 'text-anchor': 'end', class: 'axis thr' });
        left.textContent = (Math.round(maxT * f * 10) / 10) + '/s';
        var right = svg('text', { x: W - R + 6, y: y + 4, class: 'axis lag' });
        right.textContent = age(Math.round(maxLag * f));
        chart.append(left, right);
      });
      var bw = Math.max(1, ((W - L - R) * step) / span * 0.8);
      samples.forEach(function (s) {
        var y = yT(s.throughput);
        chart.append(svg('rect', { x: x(s.at) - bw, y: y, width: bw, height: H - B - y, class: 'bar' }));
      });
      if (samples.length > 1) {
        var points = samples.map(function (s) { return x(s.at).toFixed(1) + ',' + yL(s.lagMs).toFixed(1); }).join(' ');
        chart.append(svg('polyline', { points: points, class: 'lagline' }));
      }
      var label = svg('text', { x: L, y: H - 4, class: 'axis' });
      label.textContent = 'last ' + age(span) + ' (keeps ' + series.minutes + ' min' +
        ') · one sample every ' + step / 1000 + ' s';
      chart.append(label);
    });
  }
`;
