#include "trace/report_assets.h"

namespace vmxsim::trace::detail {

const char kReportCss[] = R"CSS(
body { font: 14px/1.4 "DejaVu Sans", Arial, sans-serif; margin: 1.5em 2em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: .2em; }
h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1em; margin: 1.2em 0 .2em; }
p.meta, p.note, p.scope { color: #555; margin: .2em 0 .6em; }
p.error { color: #a00; font-weight: bold; }
.charts { display: flex; flex-wrap: wrap; gap: 1em 2em; align-items: flex-start; }
.chart h3 { margin-top: .2em; }
.hist-chart { width: 360px; }
th.name { text-align: left; }
svg { display: block; }
svg text { font: 11px "DejaVu Sans", Arial, sans-serif; fill: #333; }
svg text.axis { fill: #666; }
svg rect.bar, svg rect.hist { stroke: none; }
svg .lane { fill: #f4f4f4; }
table { border-collapse: collapse; margin: .3em 0 .8em; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 2px 8px; text-align: right; }
th { background: #f0f0f0; }
td.name { text-align: left; }
tbody tr:last-child td { font-weight: bold; }
table.access tbody tr:last-child td { font-weight: normal; }
.legend { display: flex; flex-wrap: wrap; gap: .3em 1.2em; margin: .4em 0; }
.legend span.swatch { display: inline-block; width: 12px; height: 12px; margin-right: 4px;
  vertical-align: -1px; }
footer { margin-top: 2em; color: #777; font-size: 12px; }
)CSS";

// The page's only script. Everything comes from the JSON block; nothing is fetched. It
// must not swallow errors: the headless-browser test counts on exceptions reaching the
// console.
const char kReportScript[] = R"JS(
(function () {
  'use strict';
  const Data = JSON.parse(document.getElementById('vmxsim-data').textContent);
  const Ns = 'http://www.w3.org/2000/svg'; // a namespace name, not fetched
  const Palette = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948',
                   '#b07aa1', '#ff9da7', '#9c755f', '#79706e'];

  function svgEl(Tag, Attrs, Parent) {
    const E = document.createElementNS(Ns, Tag);
    for (const K in Attrs) E.setAttribute(K, Attrs[K]);
    if (Parent) Parent.appendChild(E);
    return E;
  }
  function label(Parent, X, Y, Text, Anchor, Cls) {
    const T = svgEl('text', { x: X, y: Y, 'text-anchor': Anchor || 'start' }, Parent);
    if (Cls) T.setAttribute('class', Cls);
    T.textContent = Text;
    return T;
  }
  function tip(Parent, Text) { svgEl('title', {}, Parent).textContent = Text; }
  function htmlEl(Tag, Text, Parent, Cls) {
    const E = document.createElement(Tag);
    if (Text !== undefined) E.textContent = Text;
    if (Cls) E.className = Cls;
    if (Parent) Parent.appendChild(E);
    return E;
  }
  function group(N) { return String(N).replace(/\B(?=(\d{3})+(?!\d))/g, ','); }
  function exits(N) { return group(N) + (N === 1 ? ' exit' : ' exits'); }
  function reasonName(R) { return Data.reasonNames[R] || ('reason ' + R); }

  // Exit-reason distribution from the summary (the same numbers as the tables): one
  // chart for all CPUs together, then one per CPU.
  const Summary = Data.summary || {};
  const CpuScopes = (Summary.cpus || []).map(C => ({
    name: C.name,
    rows: (C.reasons || []).map(R => ({ reason: R.reason, exits: R.exits })),
  }));
  const Totals = new Map();
  for (const S of CpuScopes)
    for (const R of S.rows) Totals.set(R.reason, (Totals.get(R.reason) || 0) + R.exits);
  const TotalRows = [...Totals.entries()].map(([reason, exits]) => ({ reason, exits }))
      .sort((A, B) => B.exits - A.exits || A.reason - B.reason);

  // One colour per reason, by rank in the total distribution.
  const Colour = new Map();
  function colourOf(R) {
    if (!Colour.has(R)) {
      const I = Colour.size;
      Colour.set(R, I < Palette.length ? Palette[I]
                                       : 'hsl(' + ((I * 137.5) % 360) + ',55%,55%)');
    }
    return Colour.get(R);
  }
  for (const R of TotalRows) colourOf(R.reason);
  for (const H of Data.histograms) colourOf(H.reason);

  let Bars = 0, HistBars = 0, Points = 0;

  function distributionChart(Parent, Title, Rows) {
    const Box = htmlEl('div', undefined, Parent, 'chart');
    const Sum = Rows.reduce((A, R) => A + R.exits, 0);
    htmlEl('h3', Title + ': ' + exits(Sum), Box);
    const BarW = 240, RowH = 18;
    const Svg = svgEl('svg', { width: BarW + 120, height: Math.max(1, Rows.length) * RowH + 4 },
                      Box);
    // The label column fits the longest reason name (measured once the text is laid out).
    const Labels = Rows.map((R, I) =>
        label(Svg, 0, I * RowH + 14, reasonName(R.reason) + ' (' + R.reason + ')', 'end'));
    const LabelW = 8 + Labels.reduce((A, T) => Math.max(A, T.getComputedTextLength()), 60);
    Svg.setAttribute('width', LabelW + BarW + 120);
    for (const T of Labels) T.setAttribute('x', LabelW - 6);
    const Max = Rows.reduce((A, R) => Math.max(A, R.exits), 0) || 1;
    Rows.forEach((R, I) => {
      const Y = I * RowH + 2;
      const Wd = Math.max(1, (R.exits / Max) * BarW);
      const Rect = svgEl('rect', { class: 'bar', x: LabelW, y: Y + 2, width: Wd,
                                   height: RowH - 4, fill: colourOf(R.reason) }, Svg);
      tip(Rect, reasonName(R.reason) + ': ' + exits(R.exits));
      const Share = Sum ? (100 * R.exits / Sum).toFixed(1) : '0.0';
      label(Svg, LabelW + Wd + 6, Y + 12, group(R.exits) + ' (' + Share + '%)');
      ++Bars;
    });
    if (!Rows.length) label(Svg, 4, 14, 'no exits');
  }

  const Dist = document.getElementById('distribution');
  distributionChart(Dist, 'All CPUs', TotalRows);
  for (const S of CpuScopes) distributionChart(Dist, S.name, S.rows);

  // Cycle histograms, one per reason, most frequent reason first.
  const HistBox = document.getElementById('histograms');
  const Hists = [...Data.histograms].sort((A, B) => B.exits - A.exits || A.reason - B.reason);
  document.getElementById('hist-note').textContent =
      'Bins are computed from every closed exit (no sampling). Log-spaced bins, used when a ' +
      'reason\'s cycles span 32x or more, are drawn with equal widths; hover a bar for its ' +
      'range.';
  for (const H of Hists) {
    const Box = htmlEl('div', undefined, HistBox, 'chart hist-chart');
    const Closed = H.counts.reduce((A, C) => A + C, 0);
    htmlEl('h3', reasonName(H.reason) + ' (' + H.reason + '): ' + exits(H.exits) +
           (H.unclosed ? ', ' + group(H.unclosed) + ' without an entry' : ''), Box);
    const W = 360, Ht = 170, L = 50, R = 10, T = 10, B = 40;
    const Svg = svgEl('svg', { width: W, height: Ht }, Box);
    svgEl('line', { x1: L, y1: Ht - B, x2: W - R, y2: Ht - B, stroke: '#999' }, Svg);
    svgEl('line', { x1: L, y1: T, x2: L, y2: Ht - B, stroke: '#999' }, Svg);
    const N = H.counts.length;
    if (!N) {
      Svg.setAttribute('height', 30);
      Svg.replaceChildren();
      label(Svg, 0, 16, 'no closed exits: no cycles to show');
      continue;
    }
    const MaxC = Math.max(...H.counts) || 1;
    // Linear bins sit at their values (the last one may be narrower); log-spaced bins
    // are drawn with equal widths.
    const PlotW = W - L - R, Lo = H.edges[0], Range = H.edges[N] - Lo;
    const xOf = I => L + (H.log ? (I / N) * PlotW : ((H.edges[I] - Lo) / Range) * PlotW);
    H.counts.forEach((C, I) => {
      const Hh = (C / MaxC) * (Ht - T - B);
      const Rect = svgEl('rect', { class: 'hist', x: xOf(I) + 0.5, y: Ht - B - Hh,
                                   width: Math.max(1, xOf(I + 1) - xOf(I) - 1), height: Hh,
                                   fill: colourOf(H.reason) }, Svg);
      const Hi = H.edges[I + 1] - 1;
      tip(Rect, group(H.edges[I]) + (Hi > H.edges[I] ? ' .. ' + group(Hi) : '') +
                ' cycles: ' + exits(C));
      ++HistBars;
    });
    label(Svg, L - 4, T + 8, group(MaxC), 'end', 'axis');
    label(Svg, L - 4, Ht - B, '0', 'end', 'axis');
    label(Svg, L, Ht - B + 14, group(H.edges[0]), 'start', 'axis');
    label(Svg, W - R, Ht - B + 14, group(H.edges[N]), 'end', 'axis');
    if (N > 2)
      label(Svg, xOf(N >> 1), Ht - B + 14, group(H.edges[N >> 1]), 'middle', 'axis');
    label(Svg, L + (W - L - R) / 2, Ht - 6,
          'cycles' + (H.log ? ' (log-spaced bins)' : '') + ', ' + group(Closed) + ' closed',
          'middle', 'axis');
  }
  if (!Hists.length) htmlEl('p', 'No exits.', HistBox, 'note');

  // Timeline: one lane per CPU, a box per exit from its TSC to its entry (at least 1px).
  const Tl = Data.timeline;
  document.getElementById('timeline-note').textContent =
      'Showing ' + group(Tl.points) + ' of ' + exits(Tl.exits) +
      (Tl.stride > 1 ? ' (one exit in every ' + group(Tl.stride) + ')' : '') +
      '; the page embeds at most ' + group(Tl.maxPoints) + ' points. x: TSC minus the first ' +
      'TSC of the trace (' + group(Tl.firstTsc) + '); a box spans an exit to its VM entry, ' +
      'a hollow box is an exit with no entry.';
  const TlBox = document.getElementById('timeline');
  const Legend = htmlEl('div', undefined, TlBox, 'legend');
  for (const [R, C] of Colour) {
    const Item = htmlEl('span', undefined, Legend);
    htmlEl('span', undefined, Item, 'swatch').style.background = C;
    Item.appendChild(document.createTextNode(reasonName(R) + ' (' + R + ')'));
  }
  const LaneH = 24, Left = 60, Right = 20, Top = 4;
  const Width = Math.max(600, Math.min(1400, (TlBox.clientWidth || 1100) - 10));
  const Span = Math.max(1, Tl.lastTsc - Tl.firstTsc);
  const PlotW = Width - Left - Right;
  const Svg = svgEl('svg', { width: Width, height: Top + Tl.cpus.length * LaneH + 24 }, TlBox);
  Tl.cpus.forEach((C, Lane) => {
    const Y = Top + Lane * LaneH;
    svgEl('rect', { class: 'lane', x: Left, y: Y, width: PlotW, height: LaneH - 4 }, Svg);
    label(Svg, Left - 6, Y + 14, 'cpu' + C.cpu, 'end');
    for (let I = 0; I < C.tsc.length; ++I) {
      const Cycles = C.cycles[I];
      const X = Left + (C.tsc[I] / Span) * PlotW;
      const Wd = Math.max(1, ((Cycles === null ? 0 : Cycles) / Span) * PlotW);
      const Attrs = { class: 'point', x: X, y: Y + 2, width: Math.min(Wd, Left + PlotW - X + 1),
                      height: LaneH - 8 };
      if (Cycles === null) {
        Attrs.fill = 'none';
        Attrs.stroke = colourOf(C.reason[I]);
      } else {
        Attrs.fill = colourOf(C.reason[I]);
      }
      const Rect = svgEl('rect', Attrs, Svg);
      tip(Rect, 'cpu' + C.cpu + ' +' + group(C.tsc[I]) + ': ' + reasonName(C.reason[I]) +
                (Cycles === null ? ', no entry' : ', ' + group(Cycles) + ' cycles'));
      ++Points;
    }
  });
  const AxisY = Top + Tl.cpus.length * LaneH + 12;
  for (let I = 0; I <= 4; ++I)
    label(Svg, Left + (PlotW * I) / 4, AxisY, '+' + group(Math.round((Span * I) / 4)),
          I === 0 ? 'start' : I === 4 ? 'end' : 'middle', 'axis');

  document.body.dataset.vmxsimBars = String(Bars);
  document.body.dataset.vmxsimHistBars = String(HistBars);
  document.body.dataset.vmxsimPoints = String(Points);
  document.body.dataset.vmxsimStatus = 'drawn';
})();
)JS";

} // namespace vmxsim::trace::detail
